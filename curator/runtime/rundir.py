"""The run directory: atomic shard commits, manifests, and the guard against mixed configs."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from curator import halt
from curator.commit import checksum, commit_files, write_json_atomic

RUN_FILE = "run.json"
MANIFESTS = "_manifests"
WORK = "_work"
#: Compression of the rejected documents every stage writes (``rejected_path``).
REJECTED_COMPRESSION = "zstd"
#: Batch job scripts, logs and the job's scheduler file (``curate submit``): not results.
JOBS = "jobs"


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
    """Layout of one run: ``<stage>/part-*``, ``rejected/``, ``errors/``, manifests, stats."""

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

    def prepare(self, fingerprint: str, config: dict, decisive: dict, force: bool) -> None:
        """Start or resume a run; refuse to mix results of another configuration (``decisive``:
        every parameter that decides the output, defaults and stage code versions included)."""
        run_file = self.root / RUN_FILE
        if run_file.exists():
            previous = json.loads(run_file.read_text(encoding="utf-8"))
            if previous.get("fingerprint") != fingerprint and not force:
                changes = _differences(previous.get("decisive", previous.get("config")),
                                       decisive)
                detail = "; ".join(changes[:5]) or "inputs changed"
                raise RunDirError(
                    f"{self.root} holds results of a different configuration ({detail}). "
                    "Rerun with --force to discard them, or choose another --output.")
            if force and previous.get("fingerprint") != fingerprint:
                self.clear()
        elif self.root.exists() and any(c.name != JOBS for c in self.root.iterdir()) \
                and not force:
            raise RunDirError(f"{self.root} exists and is not a curator run directory; "
                              "choose another --output (or --force to write into it)")
        elif force and self.root.exists():
            self.clear()
        self.root.mkdir(parents=True, exist_ok=True)
        write_json_atomic(run_file, {"fingerprint": fingerprint, "config": config,
                                     "decisive": decisive})

    def clear(self) -> None:
        """Remove everything in the run directory but the batch jobs (one may be running)."""
        for child in self.root.iterdir():
            if child.name == JOBS:
                continue
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()

    def completed(self, segment: int, fingerprint: str) -> dict[str, dict]:
        """Manifests of the shards of ``segment`` that were committed by this configuration."""
        folder = self.root / MANIFESTS / f"segment-{segment:02d}"
        if not folder.exists():
            return {}
        done = {}
        for path in sorted(folder.glob("part-*.json")):
            manifest = json.loads(path.read_text(encoding="utf-8"))
            files_whole = all((self.root / f["path"]).is_file()
                              and (self.root / f["path"]).stat().st_size == f["bytes"]
                              for f in manifest["files"])
            if manifest.get("fingerprint") == fingerprint and files_whole:
                done[manifest["part"]] = manifest
        return done

    def commit(self, pending: list[tuple[Path, Path]], manifest: dict, segment: int) -> dict:
        """Rename a shard's temporary files into place, then write its manifest (last)."""
        commit_files(pending)
        halt.point(f"shard-commit:segment-{segment:02d}", manifest["part"])
        files = [{"path": self._recorded(final), **_facts(final)} for _, final in pending]
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
            owner = owners.get(self._recorded(final))
            if owner is not None:
                manifest = json.loads(owner.read_text(encoding="utf-8"))
                for file in manifest["files"]:
                    if file["path"] == self._recorded(final):
                        file.update(_facts(tmp))
                write_json_atomic(owner, manifest)
            os.replace(tmp, final)

    def _owners(self) -> dict[str, Path]:
        """Each committed file, as manifests name it → the manifest that records it."""
        owners = {}
        for path in sorted((self.root / MANIFESTS).glob("segment-*/part-*.json")):
            for file in json.loads(path.read_text(encoding="utf-8")).get("files", []):
                owners[file["path"]] = path
        return owners

    def _recorded(self, path: Path) -> str:
        """How a manifest names ``path``: relative to the run directory when inside it."""
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else str(path)


def _facts(path: Path) -> dict[str, Any]:
    return {"bytes": path.stat().st_size, "xxh3_128": checksum(path)}
