"""Stage kinds and the registry that maps a YAML ``type`` to a stage class.

A stage is a pydantic model: its fields are its parameters (validated, documented, dumped to
YAML). Its class says how it runs: a ``Source`` lists shards and reads them as batches; a
``BatchStage`` works on one batch at a time (consecutive ones fuse into one task per shard);
a ``DatasetStage`` needs the whole dataset (dedup): a barrier between segments.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from curator.batch import BatchResult, Failure, Shard, SourceBatch, split_by_reason
from curator.commit import Commit
from curator.counts import ScoreBins, StageCount
from curator.io.files import list_shards
from curator.io.parquet import PartFormat
from curator.stages import PRELOAD
from curator.stages.context import DatasetContext
from curator.stages.filtering import apply_rules

STAGES: dict[str, type[Stage]] = {}


class Stage(BaseModel):
    """Base of every stage. Subclasses set ``type`` and declare parameters as fields."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    type: ClassVar[str] = ""
    #: Raise it when the stage's output for the same parameters changes: a run directory
    #: written by the old code is then not resumed with the new one.
    version: ClassVar[int] = 1
    #: False when the stage's work runs in native code that releases the GIL (Arrow, NumPy):
    #: a segment of such stages alone runs in threads, without worker start-up or pickling.
    holds_gil: ClassVar[bool] = True
    #: Parameters that never change the output (where it runs): left out of the fingerprint.
    placement: ClassVar[frozenset[str]] = frozenset()
    #: Parameters that shape only the stats and warnings a stage reports, never its output:
    #: left out of its key (``decisive``), so that changing one recomputes nothing.
    reporting: ClassVar[frozenset[str]] = frozenset()
    #: Modules the stage imports, with the extra that installs them (``pip install curator[X]``);
    #: checked before a run starts.
    requires: ClassVar[dict[str, str]] = {}
    #: Distributions whose version decides the stage's output (trafilatura, tokenizers): part
    #: of the key its results are reused by (``curator.store.keys``); curator's own is always.
    libraries: ClassVar[tuple[str, ...]] = ()
    #: True when the stage changes the text of documents it keeps (clean, pii): each changed
    #: document's text before the stage is kept in ``rewrites/`` (the before/after view).
    rewrites_text: ClassVar[bool] = False

    name: str | None = Field(None, description="Name used in stats and --set; defaults to type.")

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if cls.type:
            STAGES[cls.type] = cls

    def resources(self) -> dict[str, float]:
        """Dask/Ray resources a task running this stage needs (``{"GPU": 1}`` for GPU stages)."""
        return {}

    def requirements(self) -> dict[str, str]:
        """The modules this stage needs as configured -> the extra to install (``requires``)."""
        return dict(self.requires)

    def preload(self) -> tuple[str, ...]:
        """Heavy modules this stage's tasks import, worth importing once in the local cluster's
        fork server: every worker process forked from it then starts with them (curator's own
        modules only: a plugin's import side effects stay in the workers)."""
        module = type(self).__module__
        return (module, *PRELOAD.get(self.type, ())) if module.startswith("curator.") else ()

    def for_cluster(self, gpus: bool) -> Stage:
        """This stage with its placement resolved for a cluster that has (or lacks) GPU workers."""
        return self

    def warm_up(self) -> None:
        """Prepare what this stage's first task would wait for (a GPU context, its kernels
        loaded); the runtime calls it on a background thread of the process that will run the
        tasks, while earlier segments run. Nothing by default."""

    def check(self) -> None:
        """Raise ``ValueError`` (one line, naming the parameter) for a mistake that can be known
        before any work: an input that matches no file, a label the model does not have.
        ``curate validate`` and the start of ``curate run`` call it in the driver once the
        stage's requirements are installed (``runtime.requirements.check_requirements``).
        Cheap and read-only; an override calls ``super().check()``. Nothing by default."""

    def side_inputs(self) -> list[str]:
        """Files (paths, globs or folders) the stage reads besides its documents: a tokenizer,
        task files, a model. Their contents are part of the key its results are reused by, so
        a file retrained in place is seen. None by default."""
        return []

    def to_dict(self) -> dict[str, Any]:
        """The stage as it is written in YAML: ``type`` first, then non-default parameters."""
        return {"type": self.type, **self.model_dump(mode="json", exclude_defaults=True)}

    def decisive(self) -> dict[str, Any]:
        """Everything that decides the output: type, code version and every parameter, defaults
        included (an upgrade that changes a default changes the fingerprint)."""
        params = self.model_dump(mode="json", exclude=set(self.placement | self.reporting))
        return {"type": self.type, "version": self.version, **params}

    def fingerprint(self) -> str:
        blob = json.dumps(self.decisive(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


# ---------------------------------------------------------------------------- sources
class Source(Stage):
    """A stage that lists shards and reads each one as a stream of batches. Several sources may
    lead a pipeline; each writes its ``source`` name into the ``source`` column."""

    source: str | None = Field(None, description="Value of the 'source' column (documents that "
                               "carry their own keep it); default the stage name.")

    #: Parameters that only say which shards there are (``path``): not part of a shard's key,
    #: which names the shard itself, so that adding input reuses the shards already done.
    listing_params: ClassVar[frozenset[str]] = frozenset({"path"})

    def shard_params(self) -> dict[str, Any]:
        """``decisive`` without the listing: what decides how one shard is read."""
        return {k: v for k, v in self.decisive().items() if k not in self.listing_params}

    def shards(self) -> list[Shard]:
        raise NotImplementedError

    def read(self, shard: Shard, batch_bytes: int) -> Iterator[SourceBatch]:
        raise NotImplementedError

    def read_in_run(self, shard: Shard, batch_bytes: int, run_dir: Path) -> Iterator[SourceBatch]:
        """``read`` as a run calls it: sources that keep files in the run directory (downloads)
        override it."""
        return self.read(shard, batch_bytes)


class FileSource(Source):
    """A source that reads files named by paths or globs, one shard per file."""

    path: str | list[str] = Field(description="File, glob or list of them.")
    text_field: str = Field("text", description="Field holding the document text.")
    id_field: str = Field("id", description="Field holding a stable id; path:position if absent.")

    def shards(self) -> list[Shard]:
        return list_shards(self.path)


# ---------------------------------------------------------------------------- batch stages
class BatchStage(Stage):
    """A per-batch stage. ``setup`` prepares unpicklable state once per worker (models)."""

    #: True for a costly stage whose output is worth keeping per shard (extraction): a later
    #: run whose change comes after it reads those rows instead of running it again.
    checkpoint: ClassVar[bool] = False

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
    """A batch stage that removes documents.

    Either compute signals apart from decisions: ``scores`` gives named score columns, ``rules``
    turns them into one failing-mask per reason (every rule is evaluated and counted; a
    document's reason is its first failing rule; ``keep_scores`` keeps the scores as columns);
    or give ``reasons`` directly: null (keep) or a reason string per row.
    """

    keep_scores: bool = Field(False, description="Keep the score columns in the output, to "
                              "re-threshold later without recomputing.")

    #: Histogram bins per score, for stats.json and the report.
    score_bins: ClassVar[dict[str, ScoreBins]] = {}
    #: Parameters read by ``rules`` alone (thresholds): a run that changes only these decides
    #: again from the scores an earlier run kept, without computing them.
    decision_params: ClassVar[frozenset[str]] = frozenset({"keep_scores"})

    @property
    def signals_apart(self) -> bool:
        """Whether scores are computed apart from decisions (``scores`` and ``rules``)."""
        return type(self).scores is not Filter.scores

    def score_params(self) -> dict[str, Any]:
        """``decisive`` without the decision parameters: what decides the scores."""
        return {k: v for k, v in self.decisive().items() if k not in self.decision_params}

    def scores(self, batch: pa.Table) -> dict[str, pa.Array]:
        """Named score columns (one value per row)."""
        raise NotImplementedError

    def rules(self, scores: dict[str, pa.Array]) -> dict[str, pa.Array]:
        """Reason -> boolean mask of the rows that fail that rule, in order of precedence."""
        raise NotImplementedError

    def thresholds(self) -> dict[str, list[float]]:
        """Where the rules cut each score of ``score_bins`` (the report draws them)."""
        return {}

    def reasons(self, batch: pa.Table) -> pa.Array:
        """Null (keep) or the reason per row: the first failing rule."""
        return apply_rules(batch, self.rules(self.scores(batch)), {}, False).reasons

    def process(self, batch: pa.Table) -> BatchResult:
        if not self.signals_apart:
            return split_by_reason(batch, self.reasons(batch))
        return self.decide(batch, self.scores(batch))

    def decide(self, batch: pa.Table, scores: dict[str, pa.Array]) -> BatchResult:
        """The batch split by ``rules`` over ``scores`` (computed now, or kept by a run)."""
        verdict = apply_rules(batch, self.rules(scores), scores, self.keep_scores)
        result = split_by_reason(verdict.table, verdict.reasons)
        result.rule_failures = verdict.failures
        result.scores = {name: scores[name] for name in self.score_bins if name in scores}
        result.signals = scores
        return result


@dataclass
class ShardContext:
    """Where one writer puts one shard's output; its files are committed with the shard."""

    run_dir: Path
    stage_name: str
    shard: Shard
    pending: Commit  # the shard's files, shared by its writers, renamed when it commits

    def temporary_for(self, final: Path) -> Path:
        """A temporary name beside ``final``; renamed to ``final`` when the shard commits."""
        return self.pending.temporary_for(final)


class SinkWriter(Protocol):
    def write(self, table: pa.Table, payload: Any) -> list[Failure]:
        """Write rows (with what the stage's ``process`` computed for them); return those that
        could not be written."""

    def close(self) -> dict[str, Any] | None:
        """Finish the shard's files; may return facts for the shard manifest (token counts)."""


class Sink(BatchStage):
    """A batch stage that writes every kept document of a shard and passes it on unchanged.

    ``process`` may compute what the writer needs (tokens) and return it as the result's
    ``payload``; the runtime hands it to the shard's writer with the rows."""

    def open(self, ctx: ShardContext) -> SinkWriter:
        raise NotImplementedError

    def join_payloads(self, payloads: list[Any]) -> Any:
        """One payload for rows whose results were computed in pieces (in row order)."""
        return None

    def finalize(self, run_dir: Path, stage_name: str,
                 shard_infos: list[dict[str, Any]]) -> dict[str, Any]:
        """After every shard is committed (resumed ones too): write dataset-level files such as
        a blend file, and return extra entries for this stage in ``stats.json``. Idempotent."""
        return {}

    def dataset_files(self, run_dir: Path, stage_name: str) -> list[Path]:
        """The files ``finalize`` writes (``--force`` removes them with the run's other files)."""
        return []

    def output_dir(self, run_dir: Path, stage_name: str) -> Path:
        path = getattr(self, "path", None)
        return Path(path) if path else run_dir / stage_name

    def parquet_parts(self, run_dir: Path, stage_name: str) -> tuple[Path, str] | None:
        """The folder of Parquet parts (and their compression) that the runtime gives one
        schema once every shard is committed; None for other outputs."""
        return None

    def part_format(self) -> PartFormat | None:
        """How this writer lays out a shard's Parquet file, when it writes the rows it is given
        as they are (a dataset stage just before it then writes its parts so, and this writer
        publishes them as they are: ``runtime/worker/shard_task.py``); None otherwise."""
        return None

    def process(self, batch: pa.Table) -> BatchResult:
        return BatchResult(kept=batch)


# ---------------------------------------------------------------------------- dataset stages
@dataclass
class DatasetResult:
    """What a dataset-wide stage hands on: its output parts and its funnel entry."""

    parts: list[Path]
    count: StageCount


class DatasetStage(Stage):
    """A stage that needs the whole dataset (a barrier): dedup, decontamination.

    ``run_dataset`` receives the committed parts of the previous segment and a
    :class:`curator.stages.context.DatasetContext`: it maps restartable phases over the
    executor, removes what its decisions say, and returns the parts the next segment reads.
    """

    def run_dataset(self, parts: list[Path], ctx: DatasetContext) -> DatasetResult:
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
