"""The records a run keeps of its work, typed: a shard's manifest and a phase task's marker.
Their on-disk form (JSON) is read and written here only (``to_record``/``from_record``).

A file record is what ``curator.commit.facts`` returns, with the file's path as the run records
it (relative to the run directory when inside it): ``path``, ``bytes``, ``xxh3_128``, ``seen``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FileRecord = dict[str, Any]


@dataclass(frozen=True)
class ShardInput:
    """What a shard task read: its path, size and the source stage that listed it."""

    path: str
    bytes: int | None
    source: str


@dataclass
class ShardManifest:
    """What one shard task of one segment committed, written last (after its files)."""

    segment: int
    part: str
    key: str  # the key of its last stage's output: reused only under the same key
    keys: dict[str, str]  # each stage's output key, by stage name
    input: ShardInput
    stages: list[dict[str, Any]]  # each stage's count (``StageCount.to_dict``)
    rows_out: int
    sinks: dict[str, dict[str, Any]]  # what each writer's close returned
    intermediate: list[str]  # the parts handed to the next segment, in order
    files: list[FileRecord] = field(default_factory=list)
    checkpoint: str | None = None  # the key of the checkpoint kept in the store
    scores: dict[str, str] = field(default_factory=dict)  # filter -> key of its kept scores
    # what the task that wrote it did, for the driver's timeline and stats (not on disk)
    clock: list[float] | None = None
    ran: list[str] = field(default_factory=list)
    reused: dict[str, Any] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "segment": self.segment, "part": self.part, "key": self.key, "keys": self.keys,
            "input": {"path": self.input.path, "bytes": self.input.bytes,
                      "source": self.input.source},
            "stages": self.stages, "rows_out": self.rows_out, "sinks": self.sinks,
            "intermediate": self.intermediate}
        if self.checkpoint is not None:
            record["checkpoint"] = self.checkpoint
        if self.scores:
            record["scores"] = self.scores
        record["files"] = self.files
        return record

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> ShardManifest:
        """Raises ``KeyError`` or ``TypeError`` for a record of another form."""
        source = data["input"]
        return cls(data["segment"], data["part"], data.get("key", ""), data.get("keys", {}),
                   ShardInput(source["path"], source.get("bytes"), source.get("source", "")),
                   data["stages"], data["rows_out"], data.get("sinks", {}),
                   data.get("intermediate", []), data.get("files", []),
                   data.get("checkpoint"), data.get("scores", {}))

    def file(self, recorded: str) -> FileRecord | None:
        """The record of the file the run names ``recorded``, if this manifest has it."""
        return next((f for f in self.files if f["path"] == recorded), None)

    def counts(self) -> dict[str, dict[str, Any]]:
        """Each stage's count, by stage name."""
        return {entry["name"]: entry for entry in self.stages}


@dataclass
class PhaseMarker:
    """What one task of a dataset stage's phase committed, written after its files."""

    key: str  # the dataset stage's key the task ran under
    result: dict[str, Any]
    files: list[FileRecord] = field(default_factory=list)

    def to_record(self) -> dict[str, Any]:
        return {"fingerprint": self.key, "result": self.result, "files": self.files}

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> PhaseMarker:
        return cls(data.get("fingerprint", ""), data.get("result", {}), data.get("files", []))

    def checksum(self, recorded: str) -> str:
        """The recorded checksum of the file named ``recorded`` ("" if it has none)."""
        return next((f["xxh3_128"] for f in self.files if f["path"] == recorded), "")


@dataclass
class DatasetRecord:
    """A dataset stage finished under ``key``: its funnel entry, and the phases whose per-part
    work is kept for later runs (the rest of its work folder is removed)."""

    key: str
    count: dict[str, Any]
    kept_phases: list[str] = field(default_factory=list)

    def to_record(self) -> dict[str, Any]:
        return {"fingerprint": self.key, "count": self.count, "kept_phases": self.kept_phases}

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> DatasetRecord:
        return cls(data["fingerprint"], data["count"], list(data.get("kept_phases", [])))
