"""Phase 1, per part: MinHash signatures and band hashes as shuffle rows."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from curator.batch import TEXT
from curator.commit import Commit
from curator.io.parquet import read_part
from curator.io.shuffle import ShuffleDir
from curator.stages.context import PhaseResult
from curator.stages.dedup.fuzzy.common import (
    READ_THREADS,
    ROW_BITS,
    empty_bands,
    gpu_hasher,
    use_gpu,
)


@dataclass(frozen=True)
class SignatureTask:
    part: str  # its name: its band rows are kept under it (reused while it is unchanged)
    path: str
    work: str
    params: Any  # MinHashParams
    device: str
    verify: bool


def signatures_and_bands(text: pa.ChunkedArray | pa.Array | Any, params: Any, device: str,
                         want_signatures: bool) -> tuple[np.ndarray | None, np.ndarray]:
    """(signatures or None, band hashes uint64[n, bands]) on the GPU or the CPU.

    ``text`` is a host Arrow string array, or ``gpu_io.DeviceStrings`` already on the GPU."""
    from curator.kernels.gpu_io import DeviceStrings
    from curator.kernels.lsh import band_hashes
    from curator.kernels.minhash import minhash_signatures

    if isinstance(text, DeviceStrings):
        sig_d = gpu_hasher(params).signatures_device(text.data, text.starts, text.ends)
        bands_d = band_hashes(sig_d, params.bands, params.rows)
        return (sig_d.get() if want_signatures else None), bands_d.get()
    if use_gpu(device):
        hasher = gpu_hasher(params)
        if not want_signatures:
            return None, hasher.band_hashes(text)
        sig = hasher.signatures(text)
    else:
        sig = minhash_signatures(text, params)
    return (sig if want_signatures else None), band_hashes(sig, params.bands, params.rows)


def read_text(path: str, device: str) -> Any:
    """The text column: decoded on the GPU by cuDF when it is there, else read by pyarrow."""
    from curator.kernels.gpu_io import cudf_enabled, read_parquet_strings

    if use_gpu(device) and cudf_enabled():
        return read_parquet_strings(path, TEXT)
    return read_part(path, [TEXT]).column(TEXT)


@dataclass(frozen=True)
class SignatureResult(PhaseResult):
    docs: int
    empty: int  # documents without a shingle
    band_rows: int


def signature_part(task: SignatureTask) -> SignatureResult:
    sig, rows = part_band_rows(task, read_text(task.path, task.device))
    return write_band_rows(task, sig, rows)


def part_band_rows(task: SignatureTask, text: Any) -> tuple[np.ndarray | None, BandRows]:
    """Signatures (for verify, else None) and shuffle rows of one part's text."""
    sig, bands = signatures_and_bands(text, task.params, task.device, task.verify)
    return sig, band_rows(bands, empty_bands(task.params))


def band_shuffle(work: str) -> ShuffleDir:
    """Each part's band rows, sorted by band hash: bucket ``b`` is a range of hashes."""
    return ShuffleDir(Path(work) / "bands", "hash")


def signatures_path(work: str, part: str) -> Path:
    return Path(work) / "sigs" / f"{part}.npy"


def write_band_rows(task: SignatureTask, sig: np.ndarray | None, rows: BandRows
                    ) -> SignatureResult:
    pending = Commit()
    band_shuffle(task.work).write(task.part, pa.table(rows.columns), pending)
    if task.verify:
        with open(pending.temporary_for(signatures_path(task.work, task.part)), "wb") as f:
            np.save(f, np.ascontiguousarray(sig))
    pending.publish()
    return SignatureResult(rows.docs, rows.empty, len(rows.columns["row"]))


@dataclass
class BandRows:
    """One part's band hashes as shuffle rows (band, hash, row) in (row, band) order;
    documents without a shingle have no rows. A row's document key is given when a bucket is
    read (``bucket_rows``), from the part's place in the run: the rows do not depend on it."""

    columns: dict[str, Any]
    docs: int
    empty: int


def band_rows(bands: np.ndarray, empty_row: np.ndarray) -> BandRows:
    """``BandRows`` of ``bands`` (uint64[docs, bands])."""
    n, width = bands.shape
    empty = (bands == empty_row[None, :]).all(axis=1)  # no shingle: never a match
    valid = np.flatnonzero(~empty).astype(np.int64)
    hashes = bands[valid].reshape(-1) if len(valid) < n else bands.reshape(-1)
    columns = {"band": np.tile(np.arange(width, dtype=np.int16), len(valid)), "hash": hashes,
               "row": np.repeat(valid, width)}
    return BandRows(columns, n, n - len(valid))


def bucket_rows(work: str, parts: tuple[str, ...], bucket: int, buckets: int
                ) -> pa.Table | None:
    """Bucket ``bucket`` of ``buckets`` of every part's band rows, each row keyed by its
    document (``part << 32 | row``, the part's number its place in ``parts``)."""
    shuffle = band_shuffle(work)
    return keyed_rows([shuffle.read(part, bucket, buckets) for part in parts])


def split_band_rows(work: str, parts: tuple[str, ...], buckets: int) -> list[list[pa.Table]]:
    """Every part's band rows cut into ``buckets`` (``[part][bucket]``, memory-mapped), each
    part's file opened once: ``keyed_rows`` of a bucket's column is ``bucket_rows``."""
    shuffle = band_shuffle(work)
    with ThreadPoolExecutor(READ_THREADS) as pool:
        return list(pool.map(lambda part: shuffle.read_split(part, buckets), parts))


def keyed_rows(pieces: list[pa.Table]) -> pa.Table | None:
    """The band rows of ``pieces`` (one per part, in the parts' order), each keyed by its
    document (``part << 32 | row``)."""
    tables = []
    for number, table in enumerate(pieces):
        if table.num_rows:
            key = (np.int64(number) << np.int64(ROW_BITS)) | table.column("row").to_numpy()
            tables.append(pa.table({"key": key, "band": table.column("band"),
                                    "hash": table.column("hash")}))
    return pa.concat_tables(tables) if tables else None
