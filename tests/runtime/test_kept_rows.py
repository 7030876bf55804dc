"""The removal's kept rows: slices where they come in few runs, a copy where in many; the same
rows, and the same published bytes, either way."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from curator.io.parquet import PartFormat
from curator.runtime.driver.phases import RUN_BYTES, kept_rows


@pytest.fixture(scope="module")
def part() -> pa.Table:
    rng = random.Random(3)
    texts = ["".join(rng.choice("abcdefgh ") for _ in range(rng.randint(20, 4000)))
             for _ in range(3000)]
    return pa.table({"id": [f"d{i}" for i in range(3000)], "text": texts})


def _masks(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    few = np.ones(n, bool)
    few[[0, 17, 18, 1500, n - 1]] = False
    return {"few": few, "many": rng.random(n) > 0.3, "all": np.ones(n, bool),
            "none": np.zeros(n, bool), "one": np.arange(n) == 7}


@pytest.mark.parametrize("chunked", [False, True], ids=["one-chunk", "row-groups"])
@pytest.mark.parametrize("name", ["few", "many", "all", "none", "one"])
def test_kept_rows_are_the_filtered_rows_and_write_the_same_bytes(part, tmp_path, name,
                                                                  chunked) -> None:
    if chunked:  # as a part read from a file of several row groups
        part = pa.concat_tables([part.slice(0, 1000), part.slice(1000, 17), part.slice(1017)])
    keep = _masks(part.num_rows)[name]
    got = kept_rows(part, keep)
    expected = part.filter(pa.array(keep))
    assert got.equals(expected)
    layout = PartFormat(1000, "snappy")
    layout.write(got, tmp_path / "got.parquet")
    layout.write(expected, tmp_path / "expected.parquet")
    assert (tmp_path / "got.parquet").read_bytes() == (tmp_path / "expected.parquet").read_bytes()


def test_few_runs_are_slices_and_many_are_one_copy(part) -> None:
    masks = _masks(part.num_rows)
    # no copy: slices of rows 1-16, 19-1499 and 1501-2998
    assert kept_rows(part, masks["few"]).column("text").num_chunks == 3
    many = masks["many"]
    runs = np.count_nonzero(np.diff(many.astype(np.int8), prepend=0) == 1)
    assert runs * RUN_BYTES > part.nbytes  # so this part is copied once
    assert kept_rows(part, many).column("text").num_chunks == 1
