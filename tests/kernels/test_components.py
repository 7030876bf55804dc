"""Connected components against breadth-first search on random graphs."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from curator.kernels.components import components_from_ids, connected_components


def bfs_labels(n: int, src: np.ndarray, dst: np.ndarray) -> list[int]:
    adj: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(src.tolist(), dst.tolist(), strict=True):
        adj[a].append(b)
        adj[b].append(a)
    label = [-1] * n
    for root in range(n):  # increasing order: the root is the smallest node
        if label[root] >= 0:
            continue
        label[root] = root
        queue = deque([root])
        while queue:
            x = queue.popleft()
            for y in adj[x]:
                if label[y] < 0:
                    label[y] = root
                    queue.append(y)
    return label


@pytest.mark.parametrize(
    ("n", "m", "seed"),
    [
        (1, 0, 0),
        (10, 5, 1),
        (1000, 600, 2),
        (1000, 1500, 3),
        (20_000, 19_000, 4),
        (5000, 30_000, 5),
    ],
)
def test_matches_bfs(n: int, m: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, size=m)
    dst = rng.integers(0, n, size=m)
    got = connected_components(n, src, dst)
    assert got.tolist() == bfs_labels(n, src, dst)


def test_long_chain_and_order_independence() -> None:
    n = 50_000
    perm = np.random.default_rng(9).permutation(n)
    src, dst = perm[:-1], perm[1:]  # one path through all nodes in random order
    assert (connected_components(n, src, dst) == 0).all()
    order = np.random.default_rng(10).permutation(n - 1)
    assert (connected_components(n, dst[order], src[order]) == 0).all()


def test_components_from_sparse_ids() -> None:
    nodes, labels = components_from_ids(np.array([10**12, 7, 99]), np.array([5, 99, -3]))
    assert dict(zip(nodes.tolist(), labels.tolist(), strict=True)) == {
        -3: -3,
        5: 5,
        7: -3,
        99: -3,
        10**12: 5,
    }


def test_rejects_out_of_range_edges() -> None:
    with pytest.raises(ValueError, match="lie in"):
        connected_components(3, np.array([0]), np.array([3]))
