"""The ``extract_latex`` stage: LaTeX in ``text`` -> prose (see latex_text and docs/sources.md)."""

from __future__ import annotations

from typing import ClassVar

import pyarrow as pa
from pydantic import Field

from curator.batch import ID, REASON, TEXT, BatchResult, Failure
from curator.stages.base import BatchStage
from curator.stages.extract.latex_text import latex_to_text, leftover_commands

NO_TEXT = "no_text"


class ExtractLatex(BatchStage):
    """Turn the LaTeX in ``text`` into prose: comments, preamble and bibliography cut,
    argument-less macros expanded, headings kept as lines, formatting unwrapped, labels and
    parenthetical citations dropped, textual citations as ``[cite]``, references as
    ``[ref]``, figures and tables as their captions, math kept as written. A document that
    yields no text is removed (reason ``no_text``)."""

    type = "extract_latex"
    version = 1
    requires = {"pylatexenc": "extract"}
    checkpoint: ClassVar[bool] = True

    keep_abstract: bool = Field(True, description="Keep the abstract (which sits before the "
                                "first section, in the cut preamble) as the first paragraph.")

    def process(self, batch: pa.Table) -> BatchResult:
        texts, reasons, failed, keep = [], [], [], []
        leftover = 0
        ids = batch.column(ID).to_pylist()
        for row, tex in enumerate(batch.column(TEXT).to_pylist()):
            try:
                text = latex_to_text(tex, self.keep_abstract)
            except Exception as err:
                failed.append(Failure(stage=self.name or self.type, id=ids[row],
                                      reason="latex_error",
                                      error=f"latex_error: {type(err).__name__}: {err}"))
                keep.append(False)
                continue
            keep.append(True)
            texts.append(text)
            reasons.append(None if text.strip() else NO_TEXT)
            leftover += leftover_commands(text)[1]
        rows = batch.filter(pa.array(keep, pa.bool_()))
        rows = rows.set_column(rows.column_names.index(TEXT), TEXT, pa.array(texts, pa.string()))
        empty = pa.array([r is not None for r in reasons], pa.bool_())
        removed = rows.filter(empty)
        removed = removed.append_column(REASON, pa.array([r for r in reasons if r], pa.string()))
        notes = {"latex_commands_left": leftover} if leftover else {}
        return BatchResult(kept=rows.filter(pa.array([r is None for r in reasons], pa.bool_())),
                           removed=removed, failed=failed, notes=notes)
