"""The run directory: atomic shard commits, manifests, and the guard against mixed configs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from curator.commit import checksum, commit_files, write_json_atomic

RUN_FILE = "run.json"
MANIFESTS = "_manifests"
WORK = "_work"


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
        elif self.root.exists() and any(self.root.iterdir()) and not force:
            raise RunDirError(f"{self.root} exists and is not a curator run directory; "
                              "choose another --output (or --force to write into it)")
        elif force and self.root.exists():
            self.clear()
        self.root.mkdir(parents=True, exist_ok=True)
        write_json_atomic(run_file, {"fingerprint": fingerprint, "config": config,
                                     "decisive": decisive})

    def clear(self) -> None:
        """Remove everything in the run directory."""
        for child in self.root.iterdir():
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
        files = []
        for _, final in pending:
            files.append({"path": str(final.relative_to(self.root)) if final.is_relative_to(
                self.root) else str(final), "bytes": final.stat().st_size,
                "xxh3_128": checksum(final)})
        manifest = {**manifest, "files": files}
        write_json_atomic(self.manifest_path(segment, manifest["part"]), manifest)
        return manifest
