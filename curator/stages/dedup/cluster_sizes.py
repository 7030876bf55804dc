"""Clusters per size (members, survivor included) for stats.json: counted per bucket, summed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np


def size_counts(first: np.ndarray) -> dict[str, int]:
    """Clusters of two or more per size, from the sorted rows' cluster-start mask."""
    starts = np.flatnonzero(first)
    sizes = np.diff(np.append(starts, len(first)))
    values, counts = np.unique(sizes[sizes > 1], return_counts=True)
    return {str(v): int(c) for v, c in zip(values, counts, strict=True)}


def sum_size_counts(per_bucket: Iterable[dict[str, int]]) -> dict[str, int]:
    """The buckets' counts added up, smallest size first."""
    total: Counter = Counter()
    for sizes in per_bucket:
        total.update(sizes)
    return {k: total[k] for k in sorted(total, key=int)}
