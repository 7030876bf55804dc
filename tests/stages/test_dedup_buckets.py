"""default_buckets: few buckets for a small input (each is a task in every later phase), 16 once
there are 16 MB for each, one per 256 MB beyond, never more than the parts."""

from __future__ import annotations

import os

import pytest

from curator.stages.dedup.buckets import default_buckets

MB = 1 << 20


def _parts(tmp_path, sizes_mb: list[float]) -> list:
    paths = []
    for i, size in enumerate(sizes_mb):
        path = tmp_path / f"part-{i}.parquet"
        with open(path, "wb") as f:
            f.truncate(int(size * MB))  # sparse: only the size matters
        paths.append(path)
    return paths


@pytest.mark.parametrize(("sizes", "expected"), [
    ([1.0] * 20, 1),            # 20 MB: one bucket
    ([4.0] * 20, 5),            # 80 MB: one per 16 MB
    ([20.0] * 20, 16),          # 400 MB: 16 for parallelism
    ([200.0] * 40, 31),         # 8000 MB: one per 256 MB
    ([300.0] * 3, 3),           # 900 MB in 3 parts: no more buckets than parts
])
def test_buckets_grow_with_the_data(tmp_path, sizes, expected):
    parts = _parts(tmp_path, sizes)
    assert sum(os.path.getsize(p) for p in parts) == int(sum(sizes) * MB)
    assert default_buckets(parts) == expected
