"""The run directory: atomic shard commits, manifests, and the guard against mixed configs."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from curator import halt
from curator.commit import DamagedRecord, commit_files, damage, facts, read_json, write_json_atomic

RUN_FILE = "run.json"
MANIFESTS = "_manifests"
WORK = "_work"
#: Compression of the rejected documents every stage writes (``rejected_path``).
REJECTED_COMPRESSION = "zstd"
#: Batch job scripts, logs and the job's scheduler file (``curate submit``): not results.
JOBS = "jobs"
#: What a run writes under its own names and nothing else writes there: removed by ``--force``.
OWN_FOLDERS = (MANIFESTS, WORK, "rejected", "errors")
OWN_FILES = (RUN_FILE, "stats.json", "report.html")
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

    def manifest_path(self, segment: int, part: str) -> Path:
        return self.root / MANIFESTS / f"segment-{segment:02d}" / f"{part}.json"

    def work_dir(self, segment: int) -> Path:
        return self.root / WORK / f"segment-{segment:02d}"

    def rejected_path(self, stage: str, part: str) -> Path:
        return self.root / "rejected" / stage / f"{part}.parquet"

    def errors_path(self, stage: str, part: str) -> Path:
        return self.root / "errors" / stage / f"{part}.jsonl"

    def prepare(self, fingerprint: str, config: dict, decisive: dict, force: bool,
                dataset_files: Iterable[Path] = ()) -> None:
        """Start or resume a run; refuse to mix results of another configuration (``decisive``:
        every parameter that decides the output, defaults and stage code versions included) and
        to write into a folder that is not a run. ``force`` removes the files this run wrote
        (``dataset_files``: those its writers' finalize writes) and starts over."""
        run_file = self.root / RUN_FILE
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
                detail = "; ".join(changes[:5]) or "inputs changed"
                raise RunDirError(
                    f"{self.root} holds results of a different configuration ({detail}). "
                    "Rerun with --force to recompute them, or choose another --output.")
        elif self.root.exists() and any(c.name not in NOT_CONTENT for c in self.root.iterdir()):
            raise RunDirError(f"{self.root} is not a curator run (no {RUN_FILE}) and is not "
                              "empty; choose another --output")
        self.root.mkdir(parents=True, exist_ok=True)
        write_json_atomic(run_file, {"fingerprint": fingerprint, "config": config,
                                     "decisive": decisive})

    def clear(self, dataset_files: Iterable[Path] = ()) -> None:
        """Remove what this run wrote, and nothing else: its own folders and files, every file
        a manifest names (a writer's output may live outside the run directory), the writers'
        dataset files and temporaries beside them; then the folders this leaves empty."""
        mine = [self.root / name for name in OWN_FILES if name != RUN_FILE]
        for path in sorted((self.root / MANIFESTS).glob("segment-*/part-*.json")):
            try:
                mine += [self._path(f["path"]) for f in read_json(path).get("files", [])]
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

    def completed(self, segment: int, fingerprint: str) -> dict[str, dict]:
        """Manifests of the shards of ``segment`` that this configuration committed and whose
        files are whole; a damaged manifest or file is named in a warning and its shard is run
        again."""
        folder = self.root / MANIFESTS / f"segment-{segment:02d}"
        if not folder.exists():
            return {}
        done = {}
        for path in sorted(folder.glob("part-*.json")):
            try:
                manifest = read_json(path)
            except DamagedRecord as err:
                log.warning("%s; its shard is run again", err)
                continue
            if manifest.get("fingerprint") != fingerprint:
                continue
            broken = self.damaged(manifest["files"])
            if broken:
                log.warning("%s: %s; its shard is run again", broken[0][0], broken[0][1])
                continue
            done[manifest["part"]] = manifest
        return done

    def damaged(self, files: list[dict], full: bool = False) -> list[tuple[Path, str]]:
        """The recorded ``files`` (paths as manifests name them) that are not as recorded."""
        found = []
        for file in files:
            path = self._path(file["path"])
            why = damage(path, file, full)
            if why is not None:
                found.append((path, why))
        return found

    def forget(self, segment: int, part: str) -> None:
        """Drop a shard's manifest: the next pass over the segment runs it again."""
        self.manifest_path(segment, part).unlink(missing_ok=True)

    def commit(self, pending: list[tuple[Path, Path]], manifest: dict, segment: int) -> dict:
        """Rename a shard's temporary files into place, then write its manifest (last)."""
        commit_files(pending)
        halt.point(f"shard-commit:segment-{segment:02d}", manifest["part"])
        files = [{"path": self.recorded(final), **facts(final)} for _, final in pending]
        manifest = {**manifest, "files": files}
        write_json_atomic(self.manifest_path(segment, manifest["part"]), manifest)
        halt.point(f"shard-done:segment-{segment:02d}", manifest["part"])
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
        for path in sorted((self.root / MANIFESTS).glob("segment-*/part-*.json")):
            for file in read_json(path).get("files", []):
                owners[file["path"]] = path
        return owners

    def recorded(self, path: Path) -> str:
        """How a record names ``path``: relative to the run directory when inside it."""
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else str(path)

    def _path(self, recorded: str) -> Path:
        return self.root / recorded  # an absolute recorded path stays absolute
