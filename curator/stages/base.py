"""Stage kinds and the registry that maps a YAML ``type`` to a stage class.

A stage is a pydantic model: its fields are its parameters (validated, documented, dumped to
YAML). Its ``scope`` tells the planner how it runs:

* ``source``  — lists shards and reads them as batches (``read_jsonl``);
* ``batch``   — works on one batch at a time; consecutive batch stages fuse into one task
  per shard (filters, transforms, writers);
* ``dataset`` — needs the whole dataset (dedup): a barrier between segments.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from curator.batch import BatchResult, Failure, Shard, SourceBatch, split_by_reason
from curator.commit import temporary_for

Scope = Literal["source", "batch", "dataset"]

STAGES: dict[str, type[Stage]] = {}


class Stage(BaseModel):
    """Base of every stage. Subclasses set ``type`` and ``scope`` and declare parameters."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    type: ClassVar[str] = ""
    scope: ClassVar[Scope] = "batch"
    #: False when the stage's work runs in native code that releases the GIL (Arrow, NumPy):
    #: a pipeline of such stages alone runs in threads, without worker start-up or pickling.
    holds_gil: ClassVar[bool] = True

    name: str | None = Field(None, description="Name used in stats and --set; defaults to type.")

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if cls.type:
            STAGES[cls.type] = cls

    def resources(self) -> dict[str, float]:
        """Dask/Ray resources a task running this stage needs (``{"GPU": 1}`` for GPU stages)."""
        return {}

    def to_dict(self) -> dict[str, Any]:
        """The stage as it is written in YAML: ``type`` first, then non-default parameters."""
        return {"type": self.type, **self.model_dump(mode="json", exclude_defaults=True)}

    def fingerprint(self) -> str:
        """Hash of the stage's type and parameters (what decides its output)."""
        blob = json.dumps(self.to_dict(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


# ---------------------------------------------------------------------------- sources
class Source(Stage):
    """A stage that lists shards and reads each one as a stream of batches."""

    scope: ClassVar[Scope] = "source"

    def shards(self) -> list[Shard]:
        raise NotImplementedError

    def read(self, shard: Shard, batch_bytes: int) -> Iterator[SourceBatch]:
        raise NotImplementedError


class FileSource(Source):
    """A source that reads files named by paths or globs, one shard per file."""

    path: str | list[str] = Field(description="File, glob or list of them.")
    text_field: str = Field("text", description="Field holding the document text.")
    id_field: str = Field("id", description="Field holding a stable id; path:position if absent.")

    def shards(self) -> list[Shard]:
        from curator.io.files import list_shards

        return list_shards(self.path)


# ---------------------------------------------------------------------------- batch stages
class BatchStage(Stage):
    """A per-batch stage. ``setup`` prepares unpicklable state once per worker (models)."""

    timeout_s: float | None = Field(
        None, gt=0, description="Seconds one document may take: the stage then runs in a sandbox "
        "process, one document at a time, and a document still running when they are up fails "
        "with reason 'timeout' (its process is killed; the others go on). Not for writers.")
    max_document_bytes: int | None = Field(
        None, gt=0, description="A document whose text has more bytes fails with reason "
        "'too_large' without reaching the stage.")

    def setup(self) -> None:
        """Load models or other heavy state; called once per worker before the first batch."""

    def process(self, batch: pa.Table) -> BatchResult:
        raise NotImplementedError


class Filter(BatchStage):
    """A batch stage that removes documents: ``reasons`` gives null (keep) or a reason string."""

    def reasons(self, batch: pa.Table) -> pa.Array:
        raise NotImplementedError

    def process(self, batch: pa.Table) -> BatchResult:
        return split_by_reason(batch, self.reasons(batch))


@dataclass
class ShardContext:
    """Where a writer puts one shard's output, and the files to commit when the shard is whole."""

    run_dir: Path
    stage_name: str
    shard: Shard
    pending: list[tuple[Path, Path]] = field(default_factory=list)  # (temporary, final)

    def temporary_for(self, final: Path) -> Path:
        """A temporary name beside ``final``; renamed to ``final`` when the shard commits."""
        return temporary_for(final, self.pending)


class SinkWriter(Protocol):
    def write(self, table: pa.Table) -> list[Failure]:
        """Write rows; return those that could not be written."""

    def close(self) -> dict[str, Any] | None:
        """Finish the shard's files; may return facts for the shard manifest (token counts)."""


class Sink(BatchStage):
    """A batch stage that writes every kept document of a shard and passes it on unchanged."""

    def open(self, ctx: ShardContext) -> SinkWriter:
        raise NotImplementedError

    def finalize(self, run_dir: Path, stage_name: str,
                 shard_infos: list[dict[str, Any]]) -> dict[str, Any]:
        """After every shard is committed (resumed ones too): write dataset-level files such as
        a blend file, and return extra entries for this stage in ``stats.json``. Idempotent."""
        return {}

    def output_dir(self, run_dir: Path, stage_name: str) -> Path:
        path = getattr(self, "path", None)
        return Path(path) if path else run_dir / stage_name

    def process(self, batch: pa.Table) -> BatchResult:
        return BatchResult(kept=batch)


# ---------------------------------------------------------------------------- dataset stages
@dataclass
class DatasetResult:
    """What a dataset-wide stage hands on: its output parts and its funnel entry."""

    parts: list[Path]
    counts: dict[str, Any]


class DatasetStage(Stage):
    """A stage that needs the whole dataset (a barrier): dedup, decontamination, packing.

    ``run_dataset`` receives the committed parts of the previous segment and a context that
    maps tasks over the executor; it writes its own phases under ``ctx.work_dir`` so that a
    restart resumes at the phase that was cut, and returns the parts the next segment reads.
    """

    scope: ClassVar[Scope] = "dataset"

    def run_dataset(self, parts: list[Path], ctx: Any) -> DatasetResult:
        raise NotImplementedError


def stage_types() -> list[str]:
    """Every known stage type: built-in and registered."""
    from curator.stages import BUILTIN

    return sorted(set(BUILTIN) | set(STAGES))


def stage_class(type_name: str) -> type[Stage]:
    """The class for ``type_name``, importing its module on first use (KeyError when unknown)."""
    from curator.stages import BUILTIN

    if type_name not in STAGES and type_name in BUILTIN:
        importlib.import_module(BUILTIN[type_name])
    return STAGES[type_name]
