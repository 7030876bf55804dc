"""File checksums in manifests are the xxh3-128 of the file's bytes, empty files included."""

from __future__ import annotations

import xxhash

from curator.commit import checksum


def test_checksum_is_the_xxh3_128_of_the_bytes(tmp_path):
    data = bytes(range(256)) * 40_000 + b"tail"  # past one page, not a multiple of it
    (tmp_path / "data").write_bytes(data)
    (tmp_path / "empty").write_bytes(b"")
    assert checksum(tmp_path / "data") == xxhash.xxh3_128(data).hexdigest()
    assert checksum(tmp_path / "empty") == xxhash.xxh3_128(b"").hexdigest()
