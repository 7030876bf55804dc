"""Numeric kernels for fuzzy dedup: shingle hashing, MinHash, LSH banding, components.

CPU kernels use numba; GPU twins (``minhash_gpu``, ``components.components_gpu``) use CuPy,
imported only when called, and give bit-identical results.
"""

from curator.kernels.components import components_from_ids, connected_components
from curator.kernels.lsh import (
    band_hashes,
    bucket_stars,
    signature_similarity,
    star_edges,
    star_edges_from_table,
    unique_edges,
    verify_pairs,
)
from curator.kernels.minhash import (
    EMPTY,
    MinHashParams,
    empty_mask,
    minhash_signatures,
    permutations,
)
from curator.kernels.shingles import StringBuffers, shingle_hashes, string_buffers

__all__ = [
    "EMPTY",
    "MinHashParams",
    "StringBuffers",
    "band_hashes",
    "bucket_stars",
    "components_from_ids",
    "connected_components",
    "empty_mask",
    "minhash_signatures",
    "permutations",
    "shingle_hashes",
    "signature_similarity",
    "star_edges",
    "star_edges_from_table",
    "string_buffers",
    "unique_edges",
    "verify_pairs",
]
