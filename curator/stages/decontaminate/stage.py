"""The ``decontaminate`` stage: remove downstream-task text from training documents."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, model_validator

from curator.stages.base import DatasetResult, DatasetStage
from curator.stages.context import DatasetContext
from curator.stages.decontaminate.tasks import Task

if TYPE_CHECKING:
    from curator.stages.decontaminate.phases import (
        CutResult,
        FrequencyResult,
        IndexResult,
        MatchResult,
        TaskFile,
    )


class Decontaminate(DatasetStage):
    """Cut downstream-task text (benchmark n-grams) out of the documents, as GPT-3 and NeMo
    Curator do.

    Word n-grams for space-delimited languages, character n-grams for Japanese and Chinese (by
    the ``lang`` column, else by script). A task text shorter than an n-gram is used whole down
    to its task's minimum for that script: the ``whole_percentile`` (5th) of the lengths of the
    task's texts, between ``floor_*`` and ``min_*`` (so a short Japanese question quoted without
    its choices is found); shorter texts are counted as too short to check. N-grams found in
    more than ``max_docs`` documents are ignored. Each match removes the n-gram and ``margin``
    characters on either side and splits the document there; fragments under ``min_fragment``
    characters are dropped, the others are joined with ``separator`` into the document's new
    text. A document split more than ``max_splits`` times, or left without fragments, is
    removed (reason ``contaminated``). Every document gets ``contamination``: its matched spans
    (task, item, start and end in the original text), null when clean."""

    type = "decontaminate"
    holds_gil: ClassVar[bool] = True

    tasks: list[Task] = Field(min_length=1, description="Downstream tasks: {name, path} for a "
                              "ready-made spec, or {name, path, fields[, id_field]}.")
    ngram_words: int = Field(13, gt=0, description="Words per n-gram (space-delimited text).")
    min_words: int = Field(8, gt=0, description="A task text shorter than an n-gram is used "
                           "whole down to its task's minimum (see whole_percentile), at most "
                           "this many words.")
    ngram_chars: int = Field(50, gt=0, description="Characters per n-gram (Japanese, Chinese).")
    min_chars: int = Field(20, gt=0, description="The highest whole-text minimum of a task in "
                           "characters (see whole_percentile).")
    floor_words: int = Field(8, gt=0, description="The lowest whole-text minimum of a task in "
                             "words (GPT-3's lower bound).")
    floor_chars: int = Field(8, gt=0, description="The lowest whole-text minimum of a task in "
                             "characters: shorter Japanese questions occur by chance in clean "
                             "text (measured: docs/decontamination.md).")
    whole_percentile: float | None = Field(
        5, ge=0, le=100, description="Each task uses its texts whole down to this percentile of "
        "their lengths (per script: words or characters), bounded by floor_* and min_* (GPT-3 "
        "set its n per task from the 5th percentile); null: every task from min_*.")
    char_languages: list[str] = Field(["ja", "zh"], description="Languages matched by "
                                      "character n-grams (the `lang` code before -/_).")
    lang_field: str = Field("lang", description="Column with each document's language; "
                            "without it (or null) the script decides.")
    cjk_threshold: float = Field(0.5, ge=0, le=1, description="Share of letters that are CJK "
                                 "ideographs or kana above which a text is matched by "
                                 "characters.")
    max_docs: int = Field(10, ge=0, description="N-grams found in more documents are ignored.")
    margin: int = Field(200, ge=0, description="Characters removed on each side of a match.")
    min_fragment: int = Field(200, ge=0, description="Shorter fragments are dropped.")
    max_splits: int = Field(10, ge=0, description="Documents split more often are removed.")
    separator: str = Field("\n\n", description="Joins the fragments of a cut document.")
    examples: int = Field(3, ge=0, description="Examples per task in stats.json.")

    def side_inputs(self) -> list[str]:
        return [p for task in self.tasks
                for p in ([task.path] if isinstance(task.path, str) else task.path)]

    @model_validator(mode="after")
    def _consistent(self) -> Decontaminate:
        names = [t.name for t in self.tasks]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"task names must be unique; repeated: {', '.join(repeated)}")
        if self.min_words > self.ngram_words or self.min_chars > self.ngram_chars:
            raise ValueError("min_words/min_chars may not exceed ngram_words/ngram_chars")
        return self

    def check(self) -> None:
        """Every task's file (or glob) exists before any document is read."""
        super().check()
        from curator.io.files import InputError, list_shards

        for task in self.tasks:
            try:
                list_shards(task.paths())
            except InputError as err:
                raise ValueError(f"task {task.name!r}: {err}") from None

    def run_dataset(self, parts: list[Path], ctx: DatasetContext) -> DatasetResult:
        from curator.stages.decontaminate import phases
        from curator.stages.decontaminate.cut import CutRules
        from curator.stages.decontaminate.index import NgramSizes

        started = time.perf_counter()
        work = str(ctx.work_dir)
        sizes = NgramSizes(self.ngram_words, self.min_words, self.ngram_chars, self.min_chars,
                           self.cjk_threshold, self.floor_words, self.floor_chars,
                           self.whole_percentile)
        keys = [p.stem for p in parts]
        index = ctx.run_phase("index", phases.build, [phases.IndexJob(
            work, tuple(self.tasks), tuple(self._task_files(ctx)), sizes)], ["index"],
            phases.IndexResult)[0]
        matched = ctx.run_phase("match", phases.match, [
            phases.MatchJob(key, str(p), work, sizes, self.lang_field, tuple(self.char_languages),
                            ctx.batch_bytes) for key, p in zip(keys, parts, strict=True)], keys,
            phases.MatchResult, reads=parts)
        frequency = ctx.run_phase("frequency", phases.frequency, [phases.FrequencyJob(
            work, tuple(keys), index.entries, self.max_docs)], ["all"],
            phases.FrequencyResult)[0]
        rules = CutRules(self.margin, self.min_fragment, self.max_splits, self.separator)
        reports = ctx.run_phase("cut", phases.cut, [
            phases.CutJob(key, str(p), work, rules, self.examples)
            for key, p in zip(keys, parts, strict=True)], keys, phases.CutResult)
        outputs, count = ctx.remove(parts, phases.Cuts(work, ctx.rejected == "documents",
                                                       tuple(keys)))
        count.seconds = time.perf_counter() - started
        count.facts["decontamination"] = self._report(index, matched, frequency, reports)
        return DatasetResult(outputs, count)

    def _task_files(self, ctx: DatasetContext) -> list[TaskFile]:
        """Every task file (globs expanded) with its local copy, in task order."""
        from curator.io.files import InputError, list_shards
        from curator.stages.decontaminate.phases import TaskFile

        files = []
        for number, task in enumerate(self.tasks):
            try:
                shards = list_shards(task.paths())
            except InputError as err:
                raise ValueError(f"{ctx.stage_name}: task {task.name!r}: {err}") from None
            files += [TaskFile(number, s.path, str(ctx.side_input(s.path))) for s in shards]
        return files

    def _report(self, index: IndexResult, matched: list[MatchResult],
                frequency: FrequencyResult, reports: list[CutResult]) -> dict[str, Any]:
        """The figures of stats.json: the index, the dataset, and per task (bounded)."""
        tasks = {name: {**stats, "documents": 0, "spans": 0, "examples": []}
                 for name, stats in index.tasks.items()}
        totals = {k: 0 for k in ("documents_cut", "documents_removed",
                                 "removed_split_too_often", "spans", "chars_removed")}
        for report in reports:
            for key in totals:
                totals[key] += getattr(report, key)
            for name, found in report.tasks.items():
                entry = tasks[name]
                entry["documents"] += found["documents"]
                entry["spans"] += found["spans"]
                entry["examples"] = (entry["examples"] + found["examples"])[: self.examples]
        return {"index": {"entries": index.entries, "ngrams": index.ngrams,
                          "whole_texts": index.whole_texts, "bytes": index.bytes,
                          "seconds": index.seconds},
                "char_mode_documents": sum(m.char_mode_documents for m in matched),
                "occurrences": sum(m.occurrences for m in matched),
                **frequency.to_record(), **totals, "tasks": tasks}
