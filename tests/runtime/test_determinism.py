"""The output is identical whatever the executor, the number of workers and the batch size."""

from __future__ import annotations

import pytest

from curator import LengthFilter, Pipeline, ReadJsonl, Sample, WriteParquet
from tests.conftest import assert_accounting, write_shards


def _pipeline(inputs, batch_bytes: int) -> Pipeline:
    return Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), LengthFilter(min_chars=2500),
                     Sample(fraction=0.7, seed=11), WriteParquet(row_group_rows=40)],
                    name="det", batch_bytes=batch_bytes)


def _output_bytes(run_dir) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes()
            for p in sorted(run_dir.rglob("part-*")) if "_manifests" not in p.parts}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("det-in")
    write_shards(folder, 6, copies=3)
    return folder


def test_same_output_with_1_and_2_workers_and_any_batch_size(inputs, tmp_path, dask_scheduler):
    runs = {
        "local, 8 MiB batches": dict(executor="local", batch=8 << 20),
        "dask 1 worker, 64 KiB batches": dict(executor="dask", workers=1, batch=64 << 10),
        "dask 2 workers, 1 MiB batches": dict(executor="dask", workers=2, batch=1 << 20),
        "shared cluster, 300 KiB batches": dict(executor="dask", scheduler=dask_scheduler,
                                                batch=300 << 10),
    }
    outputs = {}
    for label, options in runs.items():
        batch = options.pop("batch")
        run_dir = tmp_path / label.replace(" ", "_").replace(",", "")
        result = _pipeline(inputs, batch).run(output=run_dir, progress=False, **options)
        assert_accounting(run_dir)
        assert result.stats["stages"][-1]["kept"] > 0
        outputs[label] = _output_bytes(run_dir)
    first = next(iter(outputs.values()))
    assert len(first) >= 6
    for label, output in outputs.items():
        assert output == first, f"{label} differs"
