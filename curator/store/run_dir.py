"""The run directory's layout and its records: the only code that knows where a run keeps what
(``RunDir``), and how manifests and markers are read and written (``curator.store.records``)."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from curator import halt
from curator.commit import Commit, DamagedRecord, damage, facts, read_json, write_json_atomic
from curator.store.records import DatasetRecord, FileRecord, PhaseMarker, ShardManifest

RUN_FILE = "run.json"
MANIFESTS = "_manifests"
WORK = "_work"
#: What later runs reuse besides results: each shard's checkpoint, each filter's scores.
STORE = "_store"
#: Compression of the rejected documents every stage writes (``rejected_path``).
REJECTED_COMPRESSION = "zstd"
#: Batch job scripts, logs and the job's scheduler file (``curate submit``): not results.
JOBS = "jobs"
#: What a run writes under its own names and nothing else writes there: removed by ``--force``.
OWN_FOLDERS = (MANIFESTS, WORK, STORE, "rejected", "errors", "rewrites", "_index",
               "_index_pieces")
STATS_FILE = "stats.json"
REPORT_FILE = "report.html"
#: What the run told its terminal, appended run after run.
LOG_FILE = "run.log"
#: Where a running run stands (``runtime/driver/live_progress.py``), for ``curate serve``.
PROGRESS_FILE = "progress.json"
OWN_FILES = (RUN_FILE, STATS_FILE, REPORT_FILE, LOG_FILE, PROGRESS_FILE)
#: A dataset stage's work folder: each phase's markers under ``<phase>/_done/``; the parts its
#: removal phase hands to the next segment under ``out/``.
DONE = "_done"
REMOVE = "remove"
OUT = "out"
#: Entries of a folder that do not make it a non-run (the writer lock, batch jobs).
NOT_CONTENT = frozenset({JOBS, ".curator.lock"})

log = logging.getLogger("curator")


class RunDirError(RuntimeError):
    """The run directory holds results that must not be mixed with this run's."""


def _differences(old: Any, new: Any, path: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            out += _differences(old.get(key), new.get(key), f"{path}.{key}" if path else str(key))
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        out = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            out += _differences(a, b, f"{path}[{i}]")
        return out
    return [] if old == new else [f"{path}: {old!r} → {new!r}"]


class RunDir:
    """Layout of one run: ``<stage>/part-*``, ``rejected/``, ``errors/``, manifests, stats.

    ``run.json`` marks a folder as a run; the shard manifests name every file a shard wrote (with
    size, checksum, mtime and inode), phase markers every file a phase task wrote. Resume trusts
    nothing it has not checked: why and how in docs/resume.md."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    # ------------------------------------------------------------------ where things are
    @property
    def run_file(self) -> Path:
        return self.root / RUN_FILE

    @property
    def stats_file(self) -> Path:
        return self.root / STATS_FILE

    @property
    def report_file(self) -> Path:
        return self.root / REPORT_FILE

    @property
    def log_file(self) -> Path:
        return self.root / LOG_FILE

    @property
    def progress_file(self) -> Path:
        return self.root / PROGRESS_FILE

    def is_run(self) -> bool:
        return self.run_file.exists()

    def manifest_path(self, segment: int, part: str) -> Path:
        return self.root / MANIFESTS / f"segment-{segment:02d}" / f"{part}.json"

    def unified_marker(self, segment: int) -> Path:
        """Written once a segment's Parquet folders have one schema each."""
        return self.root / MANIFESTS / f"segment-{segment:02d}" / "unified.json"

    def phase_times_file(self, work: Path) -> Path:
        """A dataset stage's phase timings (not output: beside the manifests)."""
        return self.root / MANIFESTS / work.name / "phases.json"

    def marker_path(self, work: Path, phase: str, key: str) -> Path:
        """The marker a phase task commits once its files are written."""
        return work / phase / DONE / f"{key}.json"

    def dataset_record_path(self, segment: int) -> Path:
        """Written once a dataset stage has finished: its key and count (beside the manifests)."""
        return self.root / MANIFESTS / f"segment-{segment:02d}" / "dataset.json"

    def outputs_dir(self, work: Path) -> Path:
        """Where a dataset stage's removal phase writes the parts the next segment reads."""
        return work / OUT

    def removal_marker(self, work: Path, part: str) -> Path:
        return self.marker_path(work, REMOVE, part)

    def work_dir(self, segment: int) -> Path:
        return self.root / WORK / f"segment-{segment:02d}"

    def rejected_path(self, stage: str, part: str) -> Path:
        return self.root / "rejected" / stage / f"{part}.parquet"

    def rejected_folders(self, stage: str | None = None) -> list[Path]:
        """Each stage's folder of rejected documents (or only ``stage``'s), if there."""
        folders = [self.root / "rejected" / stage] if stage else \
            sorted((self.root / "rejected").glob("*"))
        return [f for f in folders if f.is_dir()]

    def rewrites_path(self, stage: str, part: str) -> Path:
        """The text before ``stage`` of each document of ``part`` whose text the stage changed
        (``id``, ``text``): what a before/after view of the document shows."""
        return self.root / "rewrites" / stage / f"{part}.parquet"

    def rewrites_folders(self) -> list[Path]:
        """Each rewriting stage's folder of texts before it, if there."""
        return sorted(f for f in (self.root / "rewrites").glob("*") if f.is_dir())

    def errors_path(self, stage: str, part: str) -> Path:
        return self.root / "errors" / stage / f"{part}.jsonl"

    def checkpoint_path(self, segment: int, part: str) -> Path:
        """A shard's rows after its segment's checkpoint stage (extraction)."""
        return self.root / STORE / "checkpoints" / f"segment-{segment:02d}" / f"{part}.parquet"

    def scores_path(self, stage: str, part: str) -> Path:
        """A filter's scores of one shard's documents, with their ids."""
        return self.root / STORE / "scores" / stage / f"{part}.parquet"

    def scores_folders(self) -> list[Path]:
        """Each filter's folder of kept scores, if there."""
        return sorted(f for f in (self.root / STORE / "scores").glob("*") if f.is_dir())

    def prepare(self, fingerprint: str, config: dict, decisive: dict, force: bool,
                dataset_files: Iterable[Path] = ()) -> None:
        """Start, resume or update a run (a changed configuration reuses what its keys still
        match: docs/reuse.md); refuse to write into a folder that is not a run. ``force``
        removes the files this run wrote (``dataset_files``: those its writers' finalize
        writes) and starts over."""
        run_file = self.run_file
        if run_file.exists():
            try:
                previous = read_json(run_file)
            except DamagedRecord as err:  # the manifests' fingerprints still guard the results
                log.warning("%s; written again", err)
                previous = {"fingerprint": fingerprint}
            if force:
                self.clear(dataset_files)
            elif previous.get("fingerprint") != fingerprint:
                changes = _differences(previous.get("decisive", previous.get("config")),
                                       decisive)
                log.info("%s: configuration changed (%s); what it still matches is reused",
                         self.root, "; ".join(changes[:5]) or "inputs changed")
        elif self.root.exists() and any(c.name not in NOT_CONTENT for c in self.root.iterdir()):
            raise RunDirError(f"{self.root} is not a curator run (no {RUN_FILE}) and is not "
                              "empty; choose another --output")
        self.root.mkdir(parents=True, exist_ok=True)
        write_json_atomic(run_file, {"fingerprint": fingerprint, "config": config,
                                     "decisive": decisive})

    def recorded_config(self) -> dict:
        """The configuration the last run recorded in ``run.json`` (its input listing apart);
        ``FileNotFoundError`` when the folder is not a run, ``DamagedRecord`` if unreadable."""
        config = dict(read_json(self.run_file)["config"])
        config.pop("inputs", None)
        return config

    def sweep(self, folders: Iterable[Path]) -> int:
        """Remove the temporary files killed attempts left (``.<name>.<pid>-<n>.tmp``) in the
        run's own folders and ``folders`` (its writers'); run under the lock, so no writer is
        using them. Returns how many."""
        found = {p for name in OWN_FOLDERS for p in (self.root / name).rglob(".*.tmp")}
        found |= {p for folder in folders if folder.is_dir() for p in folder.glob(".*.tmp")}
        for path in found:
            path.unlink(missing_ok=True)
        return len(found)

    def clear(self, dataset_files: Iterable[Path] = ()) -> None:
        """Remove what this run wrote, and nothing else: its own folders and files, every file
        a manifest names (a writer's output may live outside the run directory), the writers'
        dataset files and temporaries beside them; then the folders this leaves empty."""
        mine = [self.root / name for name in OWN_FILES if name != RUN_FILE]
        for path in self.manifest_files():
            try:
                mine += [self.path_of(f["path"]) for f in read_json(path).get("files", [])]
            except DamagedRecord as err:
                log.warning("%s; the files it names are left in place", err)
        mine += list(dataset_files)
        folders = {p.parent for p in mine}
        mine += [t for folder in folders if folder.is_dir() for t in folder.glob(".*.tmp")]
        for path in mine:
            path.unlink(missing_ok=True)
        for name in OWN_FOLDERS:
            shutil.rmtree(self.root / name, ignore_errors=True)
        for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
            while folder != self.root and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
                folder = folder.parent

    # ------------------------------------------------------------------ records
    def manifest_files(self) -> list[Path]:
        """Every shard manifest of every segment."""
        return sorted((self.root / MANIFESTS).glob("segment-*/part-*.json"))

    def marker_files(self) -> list[Path]:
        """Every phase task marker of every dataset stage."""
        return sorted((self.root / WORK).glob(f"segment-*/*/{DONE}/*.json"))

    def manifests(self, segment: int) -> dict[str, ShardManifest]:
        """Every readable shard manifest of ``segment``, whatever its configuration (a damaged
        one is named in a warning and left out: its shard runs again)."""
        folder = self.root / MANIFESTS / f"segment-{segment:02d}"
        found = {}
        for path in sorted(folder.glob("part-*.json")):
            try:
                manifest = ShardManifest.from_record(read_json(path))
            except DamagedRecord as err:
                log.warning("%s; its shard is run again", err)
                continue
            except (KeyError, TypeError, AttributeError):
                log.warning("%s: not a shard manifest this version reads; its shard is run "
                            "again", path)
                continue
            found[manifest.part] = manifest
        return found

    def stage_segments(self) -> dict[str, tuple[int, str]]:
        """Stage name → (segment, ``shard`` or ``dataset``), as the last run's records say: a
        dataset record names its stage, the first readable shard manifest of a segment every
        stage of it."""
        out: dict[str, tuple[int, str]] = {}
        for folder in sorted((self.root / MANIFESTS).glob("segment-*")):
            index = int(folder.name.removeprefix("segment-"))
            record = self.dataset_record(index)
            if record is not None and "name" in record.count:
                out[record.count["name"]] = (index, "dataset")
                continue
            for path in sorted(folder.glob("part-*.json")):
                try:
                    names = ShardManifest.from_record(read_json(path)).counts()
                except (DamagedRecord, KeyError, TypeError, AttributeError):
                    continue
                out.update(dict.fromkeys(names, (index, "shard")))
                break
        return out

    def every_manifest(self) -> list[ShardManifest]:
        """Every readable shard manifest, of every segment."""
        found = []
        for path in self.manifest_files():
            try:
                found.append(ShardManifest.from_record(read_json(path)))
            except (DamagedRecord, KeyError, TypeError, AttributeError):
                continue
        return found

    def record_files(self, record: Path) -> list[FileRecord]:
        """The files a record (run.json, a manifest, a marker) names; ``DamagedRecord`` when it
        cannot be read."""
        return read_json(record).get("files", [])

    def store_files(self) -> list[Path]:
        """What the run keeps for later runs to reuse (checkpoints, scores)."""
        return sorted(p for p in (self.root / STORE).rglob("*") if p.is_file())

    def work_dirs(self) -> list[Path]:
        """Each segment's work folder."""
        return sorted((self.root / WORK).glob("segment-*"))

    def intermediate_files(self, work: Path) -> list[Path]:
        """The parts a shard segment handed to the next one (in its work folder)."""
        return sorted(work.glob("part-*.parquet"))

    def markers_of(self, work: Path, phase: str | None = None) -> list[Path]:
        """The task markers of one phase (or every phase) of a dataset stage."""
        return sorted(work.glob(f"{phase or '*'}/{DONE}/*.json"))

    def read_marker(self, path: Path) -> PhaseMarker | None:
        """A phase task's marker (None when there is none); ``DamagedRecord`` when unreadable."""
        if not path.exists():
            return None
        return PhaseMarker.from_record(read_json(path))

    def write_marker(self, path: Path, marker: PhaseMarker) -> None:
        write_json_atomic(path, marker.to_record())

    def phase_times(self, work: Path, key: str) -> dict[str, dict[str, float]]:
        """What each phase of a dataset stage took under ``key``: ``{"seconds": wall,
        "cpu_seconds": ..., "gpu_seconds": ...}`` (timings, not output: an unreadable file is
        no timings; one written before CPU seconds were kept has wall seconds only)."""
        try:
            saved = read_json(self.phase_times_file(work))
        except (FileNotFoundError, DamagedRecord):
            return {}
        if saved.get("fingerprint") != key:
            return {}
        return {name: {k: float(v) for k, v in entry.items() if k.endswith("seconds")}
                for name, entry in saved.get("phases", {}).items()}

    def write_phase_times(self, work: Path, key: str,
                          times: dict[str, dict[str, float]]) -> None:
        write_json_atomic(self.phase_times_file(work), {"fingerprint": key, "phases": times})

    def dataset_record(self, segment: int) -> DatasetRecord | None:
        """The finished record of the dataset stage of ``segment`` (None when there is none or
        it cannot be read: the stage then runs, reusing what its markers still hold)."""
        path = self.dataset_record_path(segment)
        try:
            return DatasetRecord.from_record(read_json(path))
        except FileNotFoundError:
            return None
        except (DamagedRecord, KeyError, TypeError) as err:
            log.warning("%s: not a dataset record this version reads (%s); the stage runs",
                        path, err)
            return None

    def write_dataset_record(self, segment: int, record: DatasetRecord) -> None:
        write_json_atomic(self.dataset_record_path(segment), record.to_record())

    def trim(self, work: Path, kept_phases: Iterable[str]) -> int:
        """Remove a finished dataset stage's work that later runs do not reuse: everything in
        ``work`` but its output parts, its removal markers, and the markers of ``kept_phases``
        (per-part work) with the files they record. Markers go before their files, so a trim
        cut part-way leaves no marker whose files are gone unnoticed. Returns files removed."""
        keep = set(self.outputs_dir(work).glob("*.parquet"))
        for phase in (REMOVE, *kept_phases):
            for marker in self.markers_of(work, phase):
                keep.add(marker)
                try:
                    keep.update(self.path_of(f["path"]) for f in self.record_files(marker))
                except DamagedRecord:
                    continue
        files = [p for p in work.rglob("*") if p.is_file() and p not in keep]
        files.sort(key=lambda p: p.parent.name != DONE)  # markers first
        for path in files:
            path.unlink(missing_ok=True)
        for folder in sorted((p for p in work.rglob("*") if p.is_dir()), reverse=True):
            if not any(folder.iterdir()):
                folder.rmdir()
        return len(files)

    def unified(self, segment: int, key: str) -> bool:
        """Whether the segment's Parquet folders were given one schema under ``key``."""
        try:
            return read_json(self.unified_marker(segment)).get("fingerprint") == key
        except (FileNotFoundError, DamagedRecord):
            return False

    def mark_unified(self, segment: int, key: str) -> None:
        write_json_atomic(self.unified_marker(segment), {"fingerprint": key})

    def completed(self, segment: int, keys: dict[str, str],
                  manifests: dict[str, ShardManifest] | None = None
                  ) -> dict[str, ShardManifest]:
        """Manifests of the shards of ``segment`` whose key is the one given (``keys``: part →
        the key this configuration computes) and whose files are whole; a damaged file is named
        in a warning and its shard is run again."""
        found = self.manifests(segment) if manifests is None else manifests
        done = {}
        for part, manifest in found.items():
            if part not in keys or manifest.key != keys[part]:
                continue
            broken = self.damaged(manifest.files)
            if broken:
                log.warning("%s: %s; its shard is run again", broken[0][0], broken[0][1])
                continue
            done[part] = manifest
        return done

    def retire(self, segment: int, manifest: ShardManifest) -> None:
        """A shard no longer in the input: its files, then its manifest, removed (all of them
        this run's own)."""
        for file in manifest.files:
            self.path_of(file["path"]).unlink(missing_ok=True)
        self.forget(segment, manifest.part)

    def damaged(self, files: list[FileRecord], full: bool = False) -> list[tuple[Path, str]]:
        """The recorded ``files`` (paths as manifests name them) that are not as recorded."""
        found = []
        for file in files:
            path = self.path_of(file["path"])
            why = damage(path, file, full)
            if why is not None:
                found.append((path, why))
        return found

    def forget(self, segment: int, part: str) -> None:
        """Drop a shard's manifest: the next pass over the segment runs it again."""
        self.manifest_path(segment, part).unlink(missing_ok=True)

    def commit(self, pending: Commit, manifest: ShardManifest,
               carried: Iterable[FileRecord] = (), previous: Iterable[FileRecord] = ()
               ) -> ShardManifest:
        """Rename a shard's temporary files into place, then write its manifest (last). The
        manifest also records ``carried`` (files of an earlier configuration this one reuses as
        they are); the ``previous`` manifest's other files are removed first (a file this
        configuration does not write is never left published)."""
        keep = {self.recorded(final) for final in pending.finals()} | {f["path"] for f in carried}
        for file in previous:
            if file["path"] not in keep:
                self.path_of(file["path"]).unlink(missing_ok=True)
        pending.publish()
        segment = f"segment-{manifest.segment:02d}"
        halt.point(f"shard-commit:{segment}", manifest.part)
        files = [{"path": self.recorded(final), **facts(final)} for final in pending.finals()]
        manifest.files = sorted([*files, *carried], key=lambda f: f["path"])
        write_json_atomic(self.manifest_path(manifest.segment, manifest.part),
                          manifest.to_record())
        halt.point(f"shard-done:{segment}", manifest.part)
        return manifest

    def replace_committed(self, replacements: Iterable[tuple[Path, Path]]) -> None:
        """Put each temporary file in place of the committed file it rewrites. The manifest that
        records the file gets its new size and checksum first, then the rename: a run killed
        between the two finds the old file (its size no longer matches, or it is rewritten
        again), never a new file with facts that do not match."""
        owners: dict[str, Path] | None = None
        for tmp, final in replacements:
            if owners is None:
                owners = self._owners()
            owner = owners.get(self.recorded(final))
            if owner is not None:
                manifest = read_json(owner)
                for file in manifest["files"]:
                    if file["path"] == self.recorded(final):
                        file.update(facts(tmp))  # a rename keeps mtime and inode
                write_json_atomic(owner, manifest)
            os.replace(tmp, final)

    def owner_of(self, path: Path) -> str | None:
        """The shard (``part-NNNNN``) whose manifest records ``path``, if any."""
        owner = self._owners().get(self.recorded(path))
        return None if owner is None else owner.stem

    def recorded_facts(self, path: Path) -> dict | None:
        """What the manifest that records ``path`` says of it (size, checksum, seen)."""
        owner = self._owners().get(self.recorded(path))
        if owner is None:
            return None
        return next(f for f in read_json(owner)["files"] if f["path"] == self.recorded(path))

    def _owners(self) -> dict[str, Path]:
        """Each committed file, as manifests name it → the manifest that records it."""
        owners = {}
        for path in self.manifest_files():
            for file in read_json(path).get("files", []):
                owners[file["path"]] = path
        return owners

    def recorded(self, path: Path) -> str:
        """How a record names ``path``: relative to the run directory when inside it."""
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else str(path)

    def store_bytes(self) -> int:
        """Bytes kept for later runs to reuse (checkpoints, scores)."""
        return sum(p.stat().st_size for p in self.store_files())

    def work_bytes(self) -> int:
        """Bytes of the work folders: the parts segments hand on and the per-part work of
        dataset stages, what later runs reuse once the run has finished."""
        return sum(p.stat().st_size for p in (self.root / WORK).rglob("*") if p.is_file())

    def path_of(self, recorded: str) -> Path:
        """The file a record names (relative to the run directory, or absolute)."""
        return self.root / recorded  # an absolute recorded path stays absolute
