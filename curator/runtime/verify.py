"""``curate verify``: every file a run recorded, checked whole against its checksum."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from curator.commit import DamagedRecord, read_json
from curator.runtime.rundir import MANIFESTS, RUN_FILE, WORK, RunDir


@dataclass
class Verdict:
    checked: int  # files whose checksum was compared
    damaged: list[str]  # one line each: the file and what is wrong with it


def verify_run(root: Path) -> Verdict:
    """Check run.json, every shard manifest and phase marker, and every file they record."""
    run_dir = RunDir(root)
    if not (root / RUN_FILE).exists():
        raise FileNotFoundError(f"{root} is not a curator run (no {RUN_FILE})")
    damaged, checked = [], 0
    for record in _records(root):
        try:
            files = read_json(record).get("files", [])  # run.json: parsed, records no files
        except DamagedRecord as err:
            damaged.append(str(err))
            continue
        for path, why in run_dir.damaged(files, full=True):
            damaged.append(f"{path}: {why} (recorded by {record})")
        checked += len(files)
    return Verdict(checked, damaged)


def _records(root: Path) -> Iterator[Path]:
    yield root / RUN_FILE
    yield from sorted((root / MANIFESTS).glob("segment-*/part-*.json"))
    yield from sorted((root / WORK).glob("segment-*/*/_done/*.json"))
