"""``curate verify``: every file a run recorded, checked whole against its checksum."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from curator.commit import DamagedRecord
from curator.store.run_dir import RunDir


@dataclass
class Verdict:
    checked: int  # files whose checksum was compared
    damaged: list[str]  # one line each: the file and what is wrong with it


def verify_run(root: Path) -> Verdict:
    """Check run.json, every shard manifest and phase marker, and every file they record."""
    run_dir = RunDir(root)
    if not run_dir.is_run():
        raise FileNotFoundError(f"{root} is not a curator run (no {run_dir.run_file.name})")
    damaged, checked = [], 0
    for record in [run_dir.run_file, *run_dir.manifest_files(), *run_dir.marker_files()]:
        try:
            files = run_dir.record_files(record)  # run.json: parsed, records no files
        except DamagedRecord as err:
            damaged.append(str(err))
            continue
        for path, why in run_dir.damaged(files, full=True):
            damaged.append(f"{path}: {why} (recorded by {record})")
        checked += len(files)
    return Verdict(checked, damaged)

