"""A run's document index: id and URL → file, row group and row, so that ``curate serve`` finds
a document without a scan, while the run runs and after.

At commit, each shard task and each removal task writes the index rows of the document files it
commits (read back from the page cache, key columns only) as a piece,
``_index_pieces/<task>.parquet``; when the run ends the pieces, the previous index's rows of the
files unchanged since, and the key columns of any file neither covers are merged into
``_index/``, and the pieces removed.

Rows ``(hash, kind, file, row_group, row)`` (``hash``: the high 64 bits of the key's XXH3-128;
``kind``: 0 id, 1 URL; ``row``: within its row group) are partitioned by the top bits of the hash
into ``B`` bucket files (``bucket-XXXXX.parquet``, B a power of two, about one per million
rows), each sorted by hash; ``files.json`` names the indexed files (ordinal → path, size,
mtime_ns). A piece is one such file, sorted by hash, naming its files in its schema metadata.
A file that no index or piece covers as it is now (size and mtime) is scanned instead, its id
and URL columns alone, a row group at a time.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import secrets
import shutil
import time
from collections import deque
from collections.abc import Iterable, Iterator
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
#: The index rows each commit wrote, until the run's end merges them into ``_index/``.
PIECES = "_index_pieces"
#: A piece is an Arrow IPC file, uncompressed: memory-mapped and binary-searched by a lookup.
PIECE_SUFFIX = ".arrow"
#: Pieces past which a segment's end merges them into ``_index/`` (a lookup reads each piece,
#: ~0.25 ms apiece on local disk).
MERGE_PIECES = 256
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


# ---------------------------------------------------------------------------- at commit
def holds_documents(root: Path, final: Path) -> bool:
    """Whether a file committed as ``final`` is one the index covers: a Parquet file inside the
    run folder, of the run's own document folders (``OWN_DATA``) or of a writer's."""
    if final.suffix != ".parquet" or not final.is_relative_to(root):
        return False
    relative = final.relative_to(root)
    if relative.parts[0] not in OWN_FOLDERS:
        return True
    return any(len(relative.parts) == len(Path(pattern).parts) and relative.match(pattern)
               for pattern in OWN_DATA)


def write_piece(run_dir: RunDir, name: str, pairs: Iterable[tuple[Path, Path]]) -> None:
    """Index the document files a task is about to commit (``(temporary, final)`` pairs, before
    the renames: a rename keeps size and mtime) as ``_index_pieces/<name>.arrow``. A task that
    commits no document file leaves no piece; a piece that cannot be written is named in a
    warning and its files are scanned by lookups until the run's end indexes them."""
    root = run_dir.root
    final = root / PIECES / f"{name}{PIECE_SUFFIX}"
    chosen = [(tmp, dest) for tmp, dest in pairs if holds_documents(root, dest)]
    try:
        if not chosen:
            final.unlink(missing_ok=True)
            return
        listed, blocks = [], []
        for ordinal, (tmp, dest) in enumerate(chosen):
            stat = tmp.stat()
            listed.append({"path": str(dest.relative_to(root)), "size": stat.st_size,
                           "mtime_ns": stat.st_mtime_ns})
            blocks += _row_blocks(tmp, ordinal)
        table = _sorted_rows(blocks).replace_schema_metadata({"files": json.dumps(listed)})
        final.parent.mkdir(exist_ok=True)
        tmp_piece = final.with_name(f".{final.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
        _write_arrow(table, tmp_piece)
        os.replace(tmp_piece, final)
    except (OSError, pa.ArrowException) as err:
        log.warning("%s: index rows not written (%s); lookups scan its files", final, err)
        return
    halt.point("index-piece", name)


def _write_arrow(table: pa.Table, path: Path) -> None:
    """``table`` as an uncompressed Arrow IPC file (memory-mapped by its readers)."""
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def _sorted_rows(blocks: list[tuple[np.ndarray, ...]]) -> pa.Table:
    """Row blocks as one table sorted by hash."""
    if not blocks:
        return SCHEMA.empty_table()
    columns = [np.concatenate(c) for c in zip(*blocks, strict=True)]
    order = np.argsort(columns[0], kind="stable")
    return pa.table([pa.array(c[order]) for c in columns], schema=SCHEMA)


# ---------------------------------------------------------------------------- at the run's end
@dataclass
class _Source:
    """Index rows written earlier (the previous index, or a piece): the files they name
    (``files.json``'s entries) and their row tables, read one at a time."""

    files: list[dict]
    tables: Iterator[pa.Table]


def merge_pieces_if_many(run_dir: RunDir, many: int = MERGE_PIECES) -> dict | None:
    """At a segment's end: merge the pieces into ``_index/`` when there are more than ``many``
    (a lookup reads each piece; the index answers in one bucket). Returns ``build_index``'s
    facts, or None when there were few."""
    if sum(1 for _ in (run_dir.root / PIECES).glob(f"*{PIECE_SUFFIX}")) <= many:
        return None
    facts = build_index(run_dir)
    log.info("document index: %d pieces merged in %.1f s", facts["pieces"], facts["seconds"])
    return facts


class IndexUnreadable(Exception):
    """Index rows written earlier stopped reading part way: the build starts again from the
    files alone."""


def build_index(run_dir: RunDir, spill_rows: int = SPILL_ROWS,
                rows_per_bucket: int = ROWS_PER_BUCKET) -> dict:
    """``_build``, from the files alone when the rows written earlier do not read whole."""
    try:
        return _build(run_dir, spill_rows, rows_per_bucket, reuse=True)
    except IndexUnreadable as err:
        log.warning("%s; the document index is built from the files", err)
        return _build(run_dir, spill_rows, rows_per_bucket, reuse=False)


def _build(run_dir: RunDir, spill_rows: int, rows_per_bucket: int, reuse: bool) -> dict:
    """Write ``_index/`` for the run's current files (in ``_index.tmp-<token>/``, then swapped
    in), then remove the pieces. A file's rows come from the previous index or a piece that
    recorded it as it is now (size and mtime), else from its id and URL columns, read a row
    group at a time. Holds at most ``spill_rows`` index rows (plus a row group's) before sorting
    them into a run file, then ``THREADS`` buckets (about ``rows_per_bucket`` rows each) at a
    time. Returns facts: documents (id rows: a document in several files counts in each), files,
    files read (covered by no piece nor the previous index), buckets, rows, spills, seconds."""
    started = time.monotonic()
    root = run_dir.root
    for stale in [*root.glob(f"{INDEX}.tmp-*"), *root.glob(f"{INDEX}.old-*")]:
        shutil.rmtree(stale, ignore_errors=True)
    token = secrets.token_hex(6)
    tmp = root / f"{INDEX}.tmp-{token}"
    (tmp / "runs").mkdir(parents=True)
    files = data_files(run_dir).files
    listed = [_listed(root, path) for path in files]
    spill = _Spill(tmp / "runs", spill_rows)
    pieces = sorted((root / PIECES).glob(f"*{PIECE_SUFFIX}"))
    covered = np.zeros(len(files), bool)
    documents = 0
    sources = [_previous_index(root), *(_piece(path) for path in pieces)] if reuse else []
    for source in sources:
        if source is not None:
            documents += _merge(source, listed, covered, spill)
    unread = [i for i in range(len(files)) if not covered[i]]
    # files read side by side (Arrow's reads, the hash kernel and NumPy release the GIL), their
    # rows added in file order; at most twice the threads' files held at once
    with ThreadPoolExecutor(THREADS) as pool:
        window: deque[Future] = deque()
        for ordinal in unread:
            window.append(pool.submit(_file_rows, files[ordinal], ordinal))
            if len(window) > 2 * THREADS:
                documents += _add(window.popleft().result(), spill, listed, files)
        while window:
            documents += _add(window.popleft().result(), spill, listed, files)
    spill.flush()
    buckets = bucket_count(spill.rows, rows_per_bucket)
    n_rows = spill.write_buckets(tmp, buckets, token)
    shutil.rmtree(tmp / "runs")
    write_json_atomic(tmp / FILES, {"build": token, "buckets": buckets, "documents": documents,
                                    "rows": n_rows, "files": listed})
    halt.point("index")
    _swap(root, tmp, token)
    for piece in pieces:
        piece.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # absent, or holding a killed writer's temporary
        (root / PIECES).rmdir()
    return {"documents": documents, "files": len(files), "files_read": len(unread),
            "pieces": len(pieces),
            "buckets": buckets, "rows": n_rows, "spills": len(spill.runs),
            "seconds": round(time.monotonic() - started, 3)}


def _previous_index(root: Path) -> _Source | None:
    """The index in place, if it reads whole (its listing, and buckets of its build)."""
    try:
        listing = read_json(root / INDEX / FILES)
        build, files = listing["build"], listing["files"]
        paths = [root / INDEX / _bucket_name(b) for b in range(listing["buckets"])]
        for path in paths:
            if pq.read_schema(path).metadata.get(b"build", b"").decode() != build:
                return None
    except (OSError, DamagedRecord, KeyError, TypeError, ValueError, pa.ArrowException):
        return None
    return _Source(files, (pq.read_table(path) for path in paths))


def _piece(path: Path) -> _Source | None:
    """A piece, if it reads."""
    found = _open_piece(path)
    return None if found is None else _Source(found[0], iter([found[1]]))


def _open_piece(path: Path) -> tuple[list[dict], pa.Table] | None:
    """A piece's files and rows (memory-mapped), or None when it does not read."""
    try:
        table = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
        return json.loads(table.schema.metadata[b"files"]), table
    except (OSError, KeyError, TypeError, ValueError, pa.ArrowException):
        return None


def _merge(source: _Source, listed: list[dict], covered: np.ndarray, spill: _Spill) -> int:
    """Add the rows of ``source``'s files that are as it recorded them and not covered yet
    (their ordinals renumbered to ``listed``'s); returns their documents (id rows)."""
    position = {entry["path"]: i for i, entry in enumerate(listed)}
    renumber = np.full(len(source.files), -1, np.int64)
    for ordinal, entry in enumerate(source.files):
        i = position.get(entry.get("path"))
        if i is not None and not covered[i] and entry.get("size") is not None \
                and (entry["size"], entry.get("mtime_ns")) \
                == (listed[i]["size"], listed[i]["mtime_ns"]):
            renumber[ordinal] = i
    if not (renumber >= 0).any():
        return 0
    documents = 0
    try:
        for table in source.tables:
            new = renumber[table.column("file").to_numpy()]
            keep = new >= 0
            rows = tuple(table.column(c).to_numpy()[keep] for c in SCHEMA.names)
            spill.add((rows[0], rows[1], new[keep].astype(np.uint32), rows[3], rows[4]))
            documents += int(np.count_nonzero(rows[1] == KINDS[ID]))
    except (OSError, pa.ArrowException, IndexError) as err:
        raise IndexUnreadable(f"index rows not read whole ({err})") from err
    covered[renumber[renumber >= 0]] = True
    return documents


def bucket_count(rows: int, rows_per_bucket: int = ROWS_PER_BUCKET) -> int:
    """A power of two, about one bucket per ``rows_per_bucket`` rows, at least 1."""
    return 1 << max(0, round(math.log2(rows / rows_per_bucket))) if rows else 1


def _listed(root: Path, path: Path) -> dict:
    stat = path.stat()
    return {"path": str(path.relative_to(root)), "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns}


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
        self.rows = 0  # all added
        self.runs: list[Path] = []

    def add(self, rows: tuple[np.ndarray, ...]) -> None:
        self.pending.append(rows)
        self.held += len(rows[0])
        self.rows += len(rows[0])
        if self.held >= self.limit:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        path = self.folder / f"run-{len(self.runs):05d}.arrow"
        _write_arrow(_sorted_rows(self.pending), path)
        self.runs.append(path)
        self.pending, self.held = [], 0

    def write_buckets(self, folder: Path, buckets: int, token: str) -> int:
        """Every bucket file (empty ones too), each sorted by hash, ``THREADS`` buckets at once
        (Arrow's sort and writer release the GIL); returns the rows written."""
        tables = [pa.ipc.open_file(pa.memory_map(str(p))).read_all() for p in self.runs]
        bounds = [_bounds(t.column("hash").to_numpy(), buckets) for t in tables]

        def write(bucket: int) -> int:
            pieces = [t.slice(b[bucket], b[bucket + 1] - b[bucket])
                      for t, b in zip(tables, bounds, strict=True)]
            merged = pa.concat_tables(pieces) if pieces else SCHEMA.empty_table()
            merged = merged.take(pc.sort_indices(merged, [("hash", "ascending")]))
            pq.write_table(merged.replace_schema_metadata({"build": token}),
                           folder / _bucket_name(bucket),
                           row_group_size=BUCKET_ROW_GROUP, compression="zstd")
            return merged.num_rows

        with ThreadPoolExecutor(THREADS) as pool:
            return sum(pool.map(write, range(buckets)))


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
    """Where the documents of id (or URL) ``key`` are: from the index and the pieces written at
    commit, for the files they cover that are as they recorded them (size and mtime); by a scan
    (key column, a row group at a time) of the files neither covers. Index answers are by 64-bit
    hash: a reader of the row checks the key. ``settled``: no run has written the folder since
    the index was built, so the index alone answers (no file listed or stat-ed but those it
    names: a lookup in a run of 100,000 files on Lustre stays cheap)."""
    hash_ = key_hash(key)
    root = run_dir.root
    indexed = _indexed_rows(root, hash_)
    if settled and indexed is not None:  # only the files holding the key are looked at
        files, rows = indexed
        holding = {f for f in rows.column("file").to_pylist() if f < len(files)}
        paths = {f: files[f]["path"] for f in holding if inside(root, root / files[f]["path"])}
        return _locations(rows, KINDS[kind], paths)
    current = data_files(run_dir)
    for why in current.refused:
        log.warning("%s", why)
    allowed = {str(path.relative_to(root)) for path in current.files}
    found: list[Location] = []
    covered: set[str] = set()
    sources = [indexed, *(_piece_rows(path, hash_) for path in
                          sorted((root / PIECES).glob(f"*{PIECE_SUFFIX}")))]
    for source in sources:
        if source is not None:
            files, rows = source
            paths = _fresh(root, files, allowed - covered)
            found += _locations(rows, KINDS[kind], paths)
            covered |= set(paths.values())
    for path in current.files:
        relative = str(path.relative_to(root))
        if relative not in covered:
            found += _scan(path, relative, key, kind)
    return found


def _indexed_rows(root: Path, hash_: int) -> tuple[list[dict], pa.Table] | None:
    """The index's files and its rows of ``hash_``; None when there is no usable index."""
    try:
        listing = read_json(root / INDEX / FILES)
        bucket = root / INDEX / _bucket_name(_bucket_of(hash_, listing["buckets"]))
        return listing["files"], _bucket_rows(bucket, hash_, listing["build"])
    except (OSError, DamagedRecord, KeyError, TypeError, ValueError, pa.ArrowException):
        return None


def _piece_rows(path: Path, hash_: int) -> tuple[list[dict], pa.Table] | None:
    """A piece's files and its rows of ``hash_`` (a binary search of its sorted hashes); None
    when it does not read."""
    found = _open_piece(path)
    if found is None:
        return None
    files, table = found
    hashes = table.column("hash").to_numpy()
    start, end = np.searchsorted(hashes, np.uint64(hash_), "left"), \
        np.searchsorted(hashes, np.uint64(hash_), "right")
    return files, table.slice(start, end - start)


def _fresh(root: Path, files: list[dict], allowed: set[str]) -> dict[int, str]:
    """Ordinal → path of the listed ``files`` that are ``allowed`` (the run's data files, not
    covered yet) and as listed (size and mtime)."""
    fresh = {}
    for ordinal, entry in enumerate(files):
        if entry.get("path") not in allowed:
            continue
        try:
            stat = (root / entry["path"]).stat()
        except OSError:
            continue
        if (stat.st_size, stat.st_mtime_ns) == (entry["size"], entry["mtime_ns"]):
            fresh[ordinal] = entry["path"]
    return fresh


def _locations(rows: pa.Table, kind: int, paths: dict[int, str]) -> list[Location]:
    """The rows of ``kind`` in the files ``paths`` names (ordinal → path)."""
    return [Location(paths[f], g, r, "index")
            for k, f, g, r in zip(*(rows.column(c).to_pylist()
                                    for c in ("kind", "file", "row_group", "row")), strict=True)
            if k == kind and f in paths]


def _bucket_rows(bucket: Path, hash_: int, build: str) -> pa.Table:
    """The rows of ``hash_`` in a bucket file of the build ``build``."""
    parquet = pq.ParquetFile(bucket)
    if parquet.schema_arrow.metadata.get(b"build", b"").decode() != build:
        raise ValueError(f"{bucket}: of another build than {FILES}")
    return _rows_of(parquet, hash_)


def _rows_of(parquet: pq.ParquetFile, hash_: int) -> pa.Table:
    """The rows of ``hash_`` in a file sorted by hash: only the row groups whose range holds
    it are read."""
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
