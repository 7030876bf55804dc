"""Phase 1, per part: MinHash signatures and band hashes as shuffle rows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from curator.batch import TEXT
from curator.commit import Commit
from curator.io.parquet import read_part
from curator.stages.dedup.buckets import write_slices
from curator.stages.dedup.fuzzy.common import ROW_BITS, empty_bands, gpu_hasher, use_gpu


@dataclass(frozen=True)
class SignatureTask:
    part: int
    path: str
    work: str
    buckets: int
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


def signature_part(task: SignatureTask) -> dict:
    sig, rows = part_band_rows(task, read_text(task.path, task.device))
    return write_band_rows(task, sig, rows)


def part_band_rows(task: SignatureTask, text: Any) -> tuple[np.ndarray | None, BandRows]:
    """Signatures (for verify, else None) and shuffle rows of one part's text."""
    sig, bands = signatures_and_bands(text, task.params, task.device, task.verify)
    return sig, band_rows(bands, empty_bands(task.params), task.part, task.buckets)


def write_band_rows(task: SignatureTask, sig: np.ndarray | None, rows: BandRows) -> dict:
    folder = Path(task.work) / "bands" / f"part-{task.part:05d}"
    pending = Commit()
    write_slices(pa.table(rows.columns), rows.bounds, lambda b: folder / f"bucket-{b:05d}.arrow",
                 pending)
    if task.verify:
        final = Path(task.work) / "sigs" / f"part-{task.part:05d}.npy"
        with open(pending.temporary_for(final), "wb") as f:
            np.save(f, np.ascontiguousarray(sig))
    pending.publish()
    return {"docs": rows.docs, "empty": rows.empty, "band_rows": int(rows.bounds[-1])}


@dataclass
class BandRows:
    """One part's band hashes as shuffle rows (band, hash, key), grouped by bucket
    (``hash % buckets``) and in (row, band) order within a bucket; bucket ``b`` is rows
    ``bounds[b]:bounds[b + 1]``. Documents without a shingle have no rows."""

    columns: dict[str, Any]
    bounds: np.ndarray
    docs: int
    empty: int


def band_rows(bands: np.ndarray, empty_row: np.ndarray, part: int, buckets: int) -> BandRows:
    """``BandRows`` of ``bands`` (uint64[docs, bands]): index arithmetic and one stable radix
    sort on 16-bit buckets instead of tiling keys, an int64 sort and taking rows of a table
    (~25 ms a 28,500-document part here, against ~195 ms)."""
    n, width = bands.shape
    empty = (bands == empty_row[None, :]).all(axis=1)  # no shingle: never a match
    valid = np.flatnonzero(~empty).astype(np.int64)
    hashes = bands[valid].reshape(-1) if len(valid) < n else bands.reshape(-1)
    target = hashes % np.uint64(buckets)
    order = np.argsort(target.astype(np.uint16 if buckets <= 1 << 16 else np.int64),
                       kind="stable")
    bounds = np.concatenate([np.zeros(1, np.int64),
                             np.cumsum(np.bincount(target.astype(np.int64), minlength=buckets))])
    keys = (np.int64(part) << np.int64(ROW_BITS)) | valid[order // width]
    columns = {"band": (order % width).astype(np.int16), "hash": hashes[order], "key": keys}
    return BandRows(columns, bounds, n, n - len(valid))
