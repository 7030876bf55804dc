"""The pipeline model: stages, run options, the plan (segments) and the fingerprint.

A plain model: ``curator.config`` reads YAML into it, the runtime runs it, and
``curator.api.Pipeline`` joins the three for the Python builder."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, field_validator, model_validator

from curator.stages.base import DatasetStage, Source, Stage, stage_class


class ExecutorConfig(BaseModel):
    """Where tasks run. ``dask`` (default) starts a LocalCluster sized to the machine unless a
    scheduler address or scheduler file names an existing cluster."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["local", "dask", "ray"] = "dask"
    workers: int | None = Field(None, gt=0, description="Worker processes (default: CPU cores).")
    scheduler: str | None = Field(None, description="Address of a running Dask scheduler.")
    scheduler_file: str | None = Field(None, description="Scheduler file of a running cluster.")
    processes: bool | None = Field(
        None, description="Local workers as processes (true) or threads (false); default: "
        "threads when every stage releases the GIL and there are at most 4 workers, else one "
        "process per worker.")
    workers_per_gpu: int | None = Field(
        None, gt=0, description="GPU worker processes a local cluster or a batch job (`curate "
        "submit`) starts per GPU (default: one per 4 of its CPU workers a GPU has, at most "
        "4). A GPU task's reading, decoding and writing run on the host in its worker's "
        "interpreter, so one process per card leaves the card waiting on one GIL while the "
        "CPU workers idle.")


class PipelineModel(BaseModel):
    """A linear DAG of stages: sources, per-batch stages, and dataset-wide barriers."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    name: str = "pipeline"
    output: str | None = Field(None, description="The run directory.")
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    on_error: Literal["skip", "fail"] = Field(
        "skip", description="skip: quarantine bad records in errors/ and go on; fail: stop.")
    rejected: Literal["ids", "documents"] = Field(
        "ids", description="What rejected/<stage>/ keeps of removed documents.")
    batch_bytes: int = Field(32 << 20, gt=0, description="Target size of a batch in bytes.")
    part_bytes: int = Field(
        64 << 20, gt=0, description="Text bytes per part handed to a dataset stage (dedup, "
        "decontaminate): a large input file is cut into parts of this size, so that the memory "
        "of a dataset stage's task does not grow with the input files.")
    intermediate_compression: Literal["none", "lz4", "snappy", "zstd"] = Field(
        "none", description="Compression of the Parquet parts the run writes for its own next "
        "step (the parts a dataset stage reads, and what it keeps for the next segment): none "
        "costs least CPU where the run directory is on a local disk; zstd writes about half "
        "as much to a shared file system. Outputs are the same bytes whichever is chosen.")
    keep_work: bool = Field(
        False, description="Keep each dataset stage's whole work folder once it has finished "
        "(per-bucket decisions, component rounds, the decontamination index), to inspect it; by "
        "default only what later runs reuse is kept (docs/reuse.md). Outputs are the same.")
    max_failed_fraction: float = Field(
        0.1, ge=0, le=1, description="A stage that fails more of a shard's documents than this "
        "stops the run, naming itself (1: never).")
    lock_stale_s: float = Field(
        600.0, gt=0, description="A run directory's lock whose holder runs on another host (a "
        "batch job on a shared file system) and has not renewed it for this long is taken over.")
    imports: list[str] = Field(
        default_factory=list, description="Modules defining third-party stages: Python files "
        "(relative to the YAML file) or dotted module names, imported on the driver and workers.")
    stages: list[SerializeAsAny[Stage]]

    def __init__(self, stages: list[Stage] | None = None, /, **data: Any) -> None:
        if stages is not None:
            data["stages"] = stages
        super().__init__(**data)

    @field_validator("stages", mode="before")
    @classmethod
    def _build_stages(cls, value: Any) -> list[Stage]:
        if not isinstance(value, list) or not value:
            raise ValueError("a pipeline needs a non-empty list of stages")
        return [s if isinstance(s, Stage) else stage_class(s["type"]).model_validate(
            {k: v for k, v in s.items() if k != "type"}) for s in value]

    @model_validator(mode="after")
    def _check_shape(self) -> PipelineModel:
        if not isinstance(self.stages[0], Source):
            raise ValueError(f"the first stage must read input (read_jsonl, read_parquet, ...); "
                             f"found {self.stages[0].type!r}")
        leading = len(self.sources())
        for stage in self.stages[leading:]:
            if isinstance(stage, Source):
                raise ValueError(f"sources lead the pipeline; found {stage.type!r} after other "
                                 "stages")
        names = [s.name for s in self.stages if s.name]
        if len(names) != len(set(names)):
            raise ValueError(f"stage names must be unique; found {names}")
        return self

    # ----------------------------------------------------------------- names and lookup
    def stage_names(self) -> list[str]:
        """Each stage's name: its ``name``, else its type, suffixed _2, _3 when repeated."""
        return resolve_names([(s.name, s.type) for s in self.stages])

    def named_stages(self) -> list[tuple[str, Stage]]:
        return list(zip(self.stage_names(), self.stages, strict=True))

    def sources(self) -> list[tuple[str, Source]]:
        """The leading source stages, by name."""
        out = []
        for name, stage in self.named_stages():
            if not isinstance(stage, Source):
                break
            out.append((name, stage))
        return out

    # ----------------------------------------------------------------- planning
    def plan(self) -> Plan:
        """Fuse per-batch stages into one task per shard; cut at dataset-wide stages and where
        the resources stages need change (a GPU stage does not pin reading and writing to the
        GPU workers)."""
        segments: list[Segment] = []
        current: list[tuple[str, Stage]] = []

        def cut() -> None:
            nonlocal current
            if current:
                segments.append(Segment(len(segments), "shard", current))
            current = []

        for name, stage in self.named_stages():
            if isinstance(stage, DatasetStage):
                cut()
                segments.append(Segment(len(segments), "dataset", [(name, stage)]))
            else:
                if current and current[-1][1].resources() != stage.resources():
                    cut()
                current.append((name, stage))
        cut()
        return Plan(segments)

    # ----------------------------------------------------------------- identity
    def to_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude_defaults=True, exclude={"stages", "executor"})
        executor = self.executor.model_dump(mode="json", exclude_defaults=True)
        if executor:
            data["executor"] = executor
        data["stages"] = [s.to_dict() for s in self.stages]
        return data

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)

    def decisive(self) -> dict[str, Any]:
        """Everything that decides the output (not the executor or batch size): every stage's
        type, code version and full parameters, defaults included."""
        return {"stages": [s.decisive() for s in self.stages], "on_error": self.on_error,
                "rejected": self.rejected, "part_bytes": self.part_bytes}

    def fingerprint(self) -> str:
        blob = json.dumps(self.decisive(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:20]


def resolve_names(stages: list[tuple[str | None, str]]) -> list[str]:
    """Names for (name, type) pairs: the name if given, else the type, then type_2, type_3..."""
    taken = {name for name, _ in stages if name}
    counts: dict[str, int] = {}
    names = []
    for name, type_name in stages:
        if not name:
            counts[type_name] = counts.get(type_name, 0) + 1
            name = type_name if counts[type_name] == 1 else f"{type_name}_{counts[type_name]}"
            while name in taken:
                counts[type_name] += 1
                name = f"{type_name}_{counts[type_name]}"
            taken.add(name)
        names.append(name)
    return names


@dataclass
class Segment:
    """Stages that run together: one task per shard (``shard``) or one barrier (``dataset``)."""

    index: int
    kind: Literal["shard", "dataset"]
    stages: list[tuple[str, Stage]]

    def resources(self) -> dict[str, float]:
        merged: dict[str, float] = {}
        for _, stage in self.stages:
            for key, amount in stage.resources().items():
                merged[key] = max(merged.get(key, 0), amount)
        return merged

    def holds_gil(self) -> bool:
        """True when a stage runs Python code that holds the GIL (worker processes pay)."""
        return any(stage.holds_gil for _, stage in self.stages)

    def describe(self) -> str:
        names = " → ".join(f"{name}({stage.type})" for name, stage in self.stages)
        unit = "one task per shard" if self.kind == "shard" else "barrier over all shards"
        gpu = " [GPU]" if self.resources().get("GPU") else ""
        mode = " GIL-free" if self.kind == "shard" and not self.holds_gil() else ""
        return f"segment {self.index}: {names}  — {unit}{mode}{gpu}"


@dataclass
class Plan:
    segments: list[Segment]

    def __str__(self) -> str:
        return "\n".join(segment.describe() for segment in self.segments)
