"""What a run publishes, for byte-identity tests: every file but the run's own records and
working folders, and ``stats.json`` without its volatile keys.

Published: the writers' outputs (wherever they write), ``rejected/``, ``errors/``, the writers'
dataset files (``blend.json``), ``stats.json``. Not published: ``run.json`` (the configuration),
``report.html`` (a view of stats.json), ``_manifests/``, ``_work/`` and ``_store/`` (what
resume and reuse read), ``jobs/``, the lock. Volatile in stats.json: timings (wall, CPU and GPU
seconds), the timeline, download notes, what a run reused (``reuse``, phases' ``reused``) and
the store's size. The run directory's own path is read as ``<run>``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: What the run directory's own path reads as (files that name paths, such as blend.json, name
#: it: two runs in two folders publish the same bytes but for it).
RUN = "<run>"
NOT_PUBLISHED_FILES = {"run.json", "report.html", ".curator.lock", "stats.json", "run.log",
                       "progress.json"}
NOT_PUBLISHED_FOLDERS = {"_manifests", "_work", "_store", "_index", "_index_pieces", "jobs"}
VOLATILE = {"seconds", "cpu_seconds", "gpu_seconds", "executor_start_seconds", "timeline",
            "phase_timeline", "seen", "reuse", "reused", "store_bytes", "work_bytes", "downloads"}


def without_volatile(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_volatile(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [without_volatile(v) for v in value]
    return value


def published(run_dir: Path) -> dict[str, bytes]:
    """Every published file of a run, by its path in the run directory."""
    out = {}
    for path in sorted(run_dir.rglob("*")):
        rel = path.relative_to(run_dir)
        if path.is_file() and rel.parts[0] not in NOT_PUBLISHED_FOLDERS \
                and str(rel) not in NOT_PUBLISHED_FILES and not path.name.endswith(".tmp"):
            out[str(rel)] = path.read_bytes().replace(str(run_dir).encode(), RUN.encode())
    return out


def stats(run_dir: Path) -> dict[str, Any]:
    text = (run_dir / "stats.json").read_text().replace(str(run_dir), RUN)
    return without_volatile(json.loads(text))


def published_differences(run_dir: Path, reference: Path) -> list[str]:
    """What differs between the published results of two runs (names, then bytes)."""
    got, want = published(run_dir), published(reference)
    diff = [f"missing {name}" for name in sorted(set(want) - set(got))]
    diff += [f"extra {name}" for name in sorted(set(got) - set(want))]
    diff += [f"bytes differ: {name}" for name in sorted(set(got) & set(want))
             if got[name] != want[name]]
    if stats(run_dir) != stats(reference):
        diff.append("stats.json differs")
    return diff


def part_files(folder: Path, suffix: str = ".parquet") -> list[Path]:
    """A folder's per-shard files (``part-<label>-<hash><suffix>``), in input order: part names
    come from the shards' labels (docs/reuse.md), so they sort as the input listing does."""
    return sorted(p for p in folder.glob(f"part-*{suffix}") if p.name.endswith(suffix))


def shard_parts(run_dir: Path, segment: int = 0) -> list[str]:
    """The part names of a segment's shards, in input order (from their manifests)."""
    folder = run_dir / "_manifests" / f"segment-{segment:02d}"
    return sorted(p.stem for p in folder.glob("part-*.json"))
