"""``curate gc RUN``: remove from a run directory what its current configuration no longer
records: checkpoints, scores and intermediate parts no shard manifest names, dedup and
decontamination work of other configurations, temporaries left by killed tasks. Published
files are never touched (a run keeps its published files current itself)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from curator.commit import DamagedRecord
from curator.runtime.driver.run_lock import run_lock
from curator.store.run_dir import REMOVE, RunDir, RunDirError


@dataclass
class RunGcReport:
    files: int = 0
    bytes: int = 0

    def summary(self, root: Path) -> str:
        return f"{root}: removed {self.files} files ({self.bytes / (1 << 20):.1f} MiB) that " \
               "the current configuration does not use"


def gc_run(root: Path, lock_stale_s: float = 600.0) -> RunGcReport:
    """Tidy ``root`` (under its lock: never while a run writes there)."""
    run_dir = RunDir(root)
    if not run_dir.is_run():
        raise RunDirError(f"{root} is not a curator run (no {run_dir.run_file.name})")
    report = RunGcReport()
    with run_lock(run_dir.root, lock_stale_s):
        manifests = run_dir.every_manifest()
        recorded = {f["path"] for m in manifests for f in m.files}
        # the files later segments read: the dataset stages' current outputs among them
        inputs = {Path(m.input.path).resolve() for m in manifests}
        stale = [p for p in run_dir.store_files() if run_dir.recorded(p) not in recorded]
        for work in run_dir.work_dirs():
            stale += [p for p in run_dir.intermediate_files(work)
                      if run_dir.recorded(p) not in recorded]
            stale += _other_configurations(run_dir, work, inputs)
        stale += [p for p in run_dir.root.rglob(".*.tmp") if p.is_file()]
        for path in stale:
            report.bytes += path.stat().st_size
            report.files += 1
            path.unlink()
    return report


def _other_configurations(run_dir: RunDir, work: Path, inputs: set[Path]) -> list[Path]:
    """A dataset stage's work that its current outputs were not made from: tasks whose marker
    carries another key than the current outputs' removal markers, unless they worked on one
    current part alone (a part's own work is kept under its own key while the part is)."""
    current, parts = None, set()
    for path in run_dir.markers_of(work, REMOVE):
        if (run_dir.outputs_dir(work) / f"{path.stem}.parquet").resolve() in inputs:
            try:
                marker = run_dir.read_marker(path)
            except DamagedRecord:
                return []
            current = marker.key if marker else current
            parts.add(path.stem)
    if current is None:
        return []
    stale = []
    for path in run_dir.markers_of(work):
        try:
            marker = run_dir.read_marker(path)
        except DamagedRecord:
            continue
        if marker is not None and marker.key != current and path.stem not in parts:
            stale += [p for f in marker.files  # its work files, not what it published
                      if (p := run_dir.path_of(f["path"])).is_file() and p.is_relative_to(work)]
            stale.append(path)
    return stale
