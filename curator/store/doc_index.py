"""A run's document index: id and URL → file, row group and row, written once a run has
finished (``_index/``), so that ``curate serve`` finds a document without a scan.

Rows ``(hash, kind, file, row_group, row)`` (``hash``: the high 64 bits of the key's XXH3-128;
``kind``: 0 id, 1 URL; ``row``: within its row group) are partitioned by the top bits of the hash
into ``B`` bucket files (``bucket-XXXXX.parquet``, B a power of two, about one per million
rows), each sorted by hash; ``files.json`` names the indexed files (ordinal → path, size,
mtime_ns). A file that is new or changed since (a running run writes on) is scanned instead,
its id and URL columns alone, a row group at a time; so is every file when there is no index.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import shutil
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash

from curator import halt
from curator.batch import ID
from curator.commit import DamagedRecord, read_json, write_json_atomic
from curator.kernels.doc_hash import doc_hashes
from curator.store.run_dir import MANIFESTS, OWN_FOLDERS, WORK, RunDir

INDEX = "_index"
FILES = "files.json"
URL = "url"
KINDS: dict[str, int] = {ID: 0, URL: 1}
#: Rows per bucket file the bucket count aims at.
ROWS_PER_BUCKET = 1_000_000
#: Index rows held in memory before they are sorted and spilled to a run file.
SPILL_ROWS = 4_000_000
BUCKET_ROW_GROUP = 65_536
#: Files whose key columns are read and hashed side by side.
THREADS = min(8, os.cpu_count() or 1)
SCHEMA = pa.schema([("hash", pa.uint64()), ("kind", pa.uint8()), ("file", pa.uint32()),
                    ("row_group", pa.uint32()), ("row", pa.uint32())])
#: Indexed besides the writers' folders: removed documents, texts before a rewrite, and the parts
#: each segment hands on (shard segments' parts, dataset stages' ``out/``).
OWN_DATA = ("rejected/*/*.parquet", "rewrites/*/*.parquet", f"{WORK}/segment-*/part-*.parquet",
            f"{WORK}/segment-*/out/*.parquet")

log = logging.getLogger("curator")


@dataclass(frozen=True)
class Location:
    """Where a document's row is: ``path`` relative to the run folder, its row group, its row
    within the row group; ``via``: answered by the index, or by a scan of the file."""

    path: str
    row_group: int
    row: int
    via: Literal["index", "scan"]


@dataclass
class DataFiles:
    """The Parquet files of a run that hold documents, and those refused (outside the run)."""

    files: list[Path] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def inside(root: Path, path: Path) -> bool:
    """Whether ``path`` (symlinks followed) lies inside the run folder ``root``."""
    return path.resolve().is_relative_to(root.resolve())


def key_hash(key: str) -> int:
    """The key's hash: the high half of its XXH3-128, as ``doc_hashes`` computes it in bulk."""
    return xxhash.xxh3_128_intdigest(key.encode("utf-8")) >> 64


def writer_folders(run_dir: RunDir) -> dict[int, list[Path]]:
    """Per segment, the folders of the Parquet files its writers publish: those its first
    readable shard manifest names outside the run's own folders (every shard of a segment runs
    the same writers, and a writer publishes a file for every shard)."""
    found: dict[int, list[Path]] = {}
    for folder in sorted((run_dir.root / MANIFESTS).glob("segment-*")):
        for manifest in sorted(folder.glob("part-*.json")):
            try:
                files = [f["path"] for f in run_dir.record_files(manifest)]
            except (DamagedRecord, KeyError, TypeError):
                continue
            segment = int(folder.name.removeprefix("segment-"))
            found[segment] = list(dict.fromkeys(
                run_dir.path_of(p).parent for p in files
                if p.endswith(".parquet") and Path(p).parts[0] not in OWN_FOLDERS))
            break
    return found


def data_files(run_dir: RunDir) -> DataFiles:
    """Every Parquet file of the run that holds documents; files outside the run folder (a
    symlink pointing out, a writer's folder elsewhere) are refused, and named."""
    root = run_dir.root
    found = [p for pattern in OWN_DATA for p in sorted(root.glob(pattern))]
    for folders in writer_folders(run_dir).values():
        found += [p for folder in folders for p in sorted(folder.glob("*.parquet"))]
    out = DataFiles()
    for path in dict.fromkeys(found):
        if inside(root, path):
            out.files.append(path)
        else:
            out.refused.append(f"{path}: outside the run folder, not read")
    return out


# ---------------------------------------------------------------------------- building
def build_index(run_dir: RunDir, spill_rows: int = SPILL_ROWS,
                rows_per_bucket: int = ROWS_PER_BUCKET) -> dict:
    """Write ``_index/`` for the run's current files (in ``_index.tmp-<token>/``, then swapped
    in). Reads the id and URL columns alone, a row group at a time; holds at most
    ``spill_rows`` index rows (plus a row group's) before sorting them into a run file, then one
    bucket (about ``rows_per_bucket`` rows) at a time. Returns facts: documents (id rows: a
    document in several files counts in each), files, buckets, rows, spills, seconds."""
    started = time.monotonic()
    root = run_dir.root
    for stale in [*root.glob(f"{INDEX}.tmp-*"), *root.glob(f"{INDEX}.old-*")]:
        shutil.rmtree(stale, ignore_errors=True)
    token = secrets.token_hex(6)
    tmp = root / f"{INDEX}.tmp-{token}"
    (tmp / "runs").mkdir(parents=True)
    files = data_files(run_dir).files
    listed = [_listed(root, path) for path in files]
    buckets = bucket_count(sum(_index_rows(p) for p in files), rows_per_bucket)
    spill = _Spill(tmp / "runs", spill_rows)
    documents = 0
    # files read side by side (Arrow's reads, the hash kernel and NumPy release the GIL), their
    # rows added in file order; at most twice the threads' files held at once
    with ThreadPoolExecutor(THREADS) as pool:
        window: deque[Future] = deque()
        for ordinal, path in enumerate(files):
            window.append(pool.submit(_file_rows, path, ordinal))
            if len(window) > 2 * THREADS:
                documents += _add(window.popleft().result(), spill, listed, files)
        while window:
            documents += _add(window.popleft().result(), spill, listed, files)
    spill.flush()
    n_rows = spill.write_buckets(tmp, buckets, token)
    shutil.rmtree(tmp / "runs")
    write_json_atomic(tmp / FILES, {"build": token, "buckets": buckets, "documents": documents,
                                    "rows": n_rows, "files": listed})
    halt.point("index")
    _swap(root, tmp, token)
    return {"documents": documents, "files": len(files), "buckets": buckets, "rows": n_rows,
            "spills": len(spill.runs), "seconds": round(time.monotonic() - started, 3)}


def bucket_count(rows: int, rows_per_bucket: int = ROWS_PER_BUCKET) -> int:
    """A power of two, about one bucket per ``rows_per_bucket`` rows, at least 1."""
    return 1 << max(0, round(math.log2(rows / rows_per_bucket))) if rows else 1


def _listed(root: Path, path: Path) -> dict:
    stat = path.stat()
    return {"path": str(path.relative_to(root)), "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns}


def _index_rows(path: Path) -> int:
    """The index rows a file gives, from its footer: a row per id, and per URL if it has any
    (none from a file whose footer cannot be read)."""
    try:
        parquet = pq.ParquetFile(path)
    except (OSError, pa.ArrowException):
        return 0
    return parquet.metadata.num_rows * len(_keys(parquet))


def _keys(parquet: pq.ParquetFile) -> list[str]:
    names = parquet.schema_arrow.names
    return [kind for kind in KINDS if kind in names]


def _add(result: tuple[Any, str | None], spill: _Spill, listed: list[dict],
         files: list[Path]) -> int:
    """Add one file's rows to the spill; returns its documents (id rows). A file that could not
    be read is marked unindexed (its size left out): lookups scan it."""
    rows_of, error = result
    if error is not None:
        log.warning("%s: not indexed (%s)", files[rows_of], error)
        listed[rows_of]["size"] = None
        return 0
    documents = 0
    for rows in rows_of:
        documents += int(np.count_nonzero(rows[1] == KINDS[ID]))
        spill.add(rows)
    return documents


def _file_rows(path: Path, ordinal: int) -> tuple[Any, str | None]:
    """One file's index rows (a list of row blocks, read a row group and its key columns at a
    time), or its ordinal and why it could not be read."""
    try:
        return list(_row_blocks(path, ordinal)), None
    except (OSError, pa.ArrowException) as err:
        return ordinal, str(err)


def _row_blocks(path: Path, ordinal: int) -> Iterator[tuple[np.ndarray, ...]]:
    parquet = pq.ParquetFile(path)
    keys = _keys(parquet)
    for group in range(parquet.num_row_groups):
        table = parquet.read_row_group(group, columns=keys)
        for kind in keys:
            values = table.column(kind).combine_chunks()
            rows = np.flatnonzero(pc.is_valid(values).to_numpy(zero_copy_only=False))
            if not len(rows):
                continue
            hashes = doc_hashes(pc.take(values, rows))[0]  # numba: ~40 M keys/s, not ~4 M
            yield (hashes, np.full(len(rows), KINDS[kind], np.uint8),
                   np.full(len(rows), ordinal, np.uint32), np.full(len(rows), group, np.uint32),
                   rows.astype(np.uint32))


class _Spill:
    """Index rows gathered, sorted by hash and written to run files (Arrow IPC) every
    ``limit`` rows; then merged one bucket at a time, memory-mapped."""

    def __init__(self, folder: Path, limit: int) -> None:
        self.folder, self.limit = folder, limit
        self.pending: list[tuple[np.ndarray, ...]] = []
        self.held = 0
        self.runs: list[Path] = []

    def add(self, rows: tuple[np.ndarray, ...]) -> None:
        self.pending.append(rows)
        self.held += len(rows[0])
        if self.held >= self.limit:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        columns = [np.concatenate(c) for c in zip(*self.pending, strict=True)]
        order = np.argsort(columns[0], kind="stable")
        table = pa.table([pa.array(c[order]) for c in columns], schema=SCHEMA)
        path = self.folder / f"run-{len(self.runs):05d}.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, SCHEMA) as writer:
            writer.write_table(table)
        self.runs.append(path)
        self.pending, self.held = [], 0

    def write_buckets(self, folder: Path, buckets: int, token: str) -> int:
        """Every bucket file (empty ones too), each sorted by hash; returns the rows written."""
        tables = [pa.ipc.open_file(pa.memory_map(str(p))).read_all() for p in self.runs]
        bounds = [_bounds(t.column("hash").to_numpy(), buckets) for t in tables]
        written = 0
        for bucket in range(buckets):
            pieces = [t.slice(b[bucket], b[bucket + 1] - b[bucket])
                      for t, b in zip(tables, bounds, strict=True)]
            merged = pa.concat_tables(pieces) if pieces else SCHEMA.empty_table()
            merged = merged.take(pc.sort_indices(merged, [("hash", "ascending")]))
            pq.write_table(merged.replace_schema_metadata({"build": token}),
                           folder / _bucket_name(bucket),
                           row_group_size=BUCKET_ROW_GROUP, compression="zstd")
            written += merged.num_rows
        return written


def _bounds(hashes: np.ndarray, buckets: int) -> np.ndarray:
    """Where each bucket starts in sorted ``hashes``, and their end: bucket b holds the hashes
    whose top log2(buckets) bits are b."""
    starts = np.array([b << _shift(buckets) for b in range(1, buckets)], np.uint64)
    return np.concatenate([[0], np.searchsorted(hashes, starts), [len(hashes)]])


def _shift(buckets: int) -> int:
    return 65 - buckets.bit_length()


def _bucket_of(hash_: int, buckets: int) -> int:
    return hash_ >> _shift(buckets) if buckets > 1 else 0


def _bucket_name(bucket: int) -> str:
    return f"bucket-{bucket:05d}.parquet"


def _swap(root: Path, tmp: Path, token: str) -> None:
    """Put the new index in place of the old one: a reader between the two renames finds no
    index (and scans), never a mix of the two (bucket files carry their build's token)."""
    final, old = root / INDEX, root / f"{INDEX}.old-{token}"
    if final.exists():
        os.rename(final, old)
    os.rename(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------------------- looking up
def index_built(run_dir: RunDir) -> float | None:
    """When the run's index was written (epoch seconds), or None when it has none."""
    try:
        return (run_dir.root / INDEX / FILES).stat().st_mtime
    except OSError:
        return None


def lookup(run_dir: RunDir, key: str, kind: Literal["id", "url"],
           settled: bool = False) -> list[Location]:
    """Where the documents of id (or URL) ``key`` are: from the index for the files it covers
    that are as it recorded them (size and mtime); by a scan (key column, a row group at a time)
    of the files new or changed since, or of every file when there is no usable index. Index
    answers are by 64-bit hash: a reader of the row checks the key. ``settled``: no run has
    written the folder since the index was built, so the index alone answers (no file listed
    or stat-ed but those it names: a lookup in a run of 100,000 files on Lustre stays cheap)."""
    hash_ = key_hash(key)
    if settled:
        found = _settled(run_dir, hash_, KINDS[kind])
        if found is not None:
            return found
    current = data_files(run_dir)
    for why in current.refused:
        log.warning("%s", why)
    found, covered = _from_index(run_dir, hash_, KINDS[kind])
    for path in current.files:
        relative = str(path.relative_to(run_dir.root))
        if relative not in covered:
            found += _scan(path, relative, key, kind)
    return found


def _from_index(run_dir: RunDir, hash_: int, kind: int) -> tuple[list[Location], set[str]]:
    """The index's locations in files still as indexed, and the paths of those files."""
    root = run_dir.root
    try:
        listing = read_json(root / INDEX / FILES)
        bucket = root / INDEX / _bucket_name(_bucket_of(hash_, listing["buckets"]))
        rows = _bucket_rows(bucket, hash_, listing["build"])
    except (FileNotFoundError, DamagedRecord, KeyError, TypeError, ValueError):
        return [], set()
    fresh = {}
    for ordinal, entry in enumerate(listing["files"]):
        path = root / entry["path"]
        try:
            stat = path.stat()
        except OSError:
            continue
        if (stat.st_size, stat.st_mtime_ns) == (entry["size"], entry["mtime_ns"]) \
                and inside(root, path):
            fresh[ordinal] = entry["path"]
    found = [Location(fresh[f], g, r, "index")
             for k, f, g, r in zip(*(rows.column(c).to_pylist()
                                     for c in ("kind", "file", "row_group", "row")), strict=True)
             if k == kind and f in fresh]
    return found, set(fresh.values())


def _settled(run_dir: RunDir, hash_: int, kind: int) -> list[Location] | None:
    """The index's locations of ``hash_`` in files inside the run, unchecked against the files'
    sizes and mtimes; None when there is no usable index."""
    root = run_dir.root
    try:
        listing = read_json(root / INDEX / FILES)
        bucket = root / INDEX / _bucket_name(_bucket_of(hash_, listing["buckets"]))
        rows = _bucket_rows(bucket, hash_, listing["build"])
        paths = [entry["path"] for entry in listing["files"]]
    except (FileNotFoundError, DamagedRecord, KeyError, TypeError, ValueError):
        return None
    return [Location(paths[f], g, r, "index")
            for k, f, g, r in zip(*(rows.column(c).to_pylist()
                                    for c in ("kind", "file", "row_group", "row")), strict=True)
            if k == kind and inside(root, root / paths[f])]


def _bucket_rows(bucket: Path, hash_: int, build: str) -> pa.Table:
    """The rows of ``hash_`` in a bucket file: only the row groups whose range holds it."""
    parquet = pq.ParquetFile(bucket)
    if parquet.schema_arrow.metadata.get(b"build", b"").decode() != build:
        raise ValueError(f"{bucket}: of another build than {FILES}")
    found = []
    for group in range(parquet.num_row_groups):
        stats = parquet.metadata.row_group(group).column(0).statistics
        if stats is not None and stats.has_min_max and not stats.min <= hash_ <= stats.max:
            continue
        table = parquet.read_row_group(group)
        found.append(table.filter(pc.equal(table.column("hash"), pa.scalar(hash_, pa.uint64()))))
    return pa.concat_tables(found) if found else SCHEMA.empty_table()


def _scan(path: Path, relative: str, key: str, kind: str) -> list[Location]:
    """The rows of one file whose ``kind`` column is ``key`` (that column alone is read); none
    from a file that cannot be read (named in a warning)."""
    found = []
    try:
        parquet = pq.ParquetFile(path)
        if kind not in parquet.schema_arrow.names:
            return []
        for group in range(parquet.num_row_groups):
            column = parquet.read_row_group(group, columns=[kind]).column(0).combine_chunks()
            hits = np.flatnonzero(pc.fill_null(pc.equal(column, key), False).to_numpy(
                zero_copy_only=False))
            found += [Location(relative, group, int(row), "scan") for row in hits]
    except (OSError, pa.ArrowException) as err:
        log.warning("%s: not read (%s)", path, err)
    return found
