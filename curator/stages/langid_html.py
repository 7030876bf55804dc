"""Language pre-filter on raw HTML: removes the pages that are clearly in another language before
the expensive extractor runs. The text the model reads comes from resiliparse's fast
``extract_plain_text`` (main content only), a few milliseconds a page against tens for
trafilatura; only confident verdicts remove a page, and the ``langid`` stage after extraction
makes the real decision. See docs/web-extraction.md for how the default threshold was chosen.

resiliparse's pass is quadratic in the nesting depth of a page (100k nested ``<div>`` take
minutes): by default each page runs under ``timeout_s`` in the segment's sandbox process and
pages over ``max_document_bytes`` fail before it, as in ``extract_html``."""

from __future__ import annotations

from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, field_validator

from curator.batch import TEXT
from curator.counts import ScoreBins
from curator.runtime.worker.sandbox import each_document
from curator.stages.base import Filter
from curator.stages.langid import (
    LangId,
    check_languages,
    checked_model,
    model_requirements,
    normalised_languages,
)

HTML_LANG = "html_lang"
HTML_LANG_SCORE = "html_lang_score"


class LangIdHtml(Filter):
    """Identify the language of each HTML page's quickly extracted main text (fastText, as
    ``langid``) and remove a page (``lang_clearly_other``) when the model names a language not in
    ``languages`` with a score of at least ``min_other_score``. Pages without letters, and every
    page the model is less sure of, go on to extraction."""

    type = "langid_html"
    requires: ClassVar[dict[str, str]] = {"fasttext": "langid", "resiliparse": "extract"}
    score_bins: ClassVar[dict[str, ScoreBins]] = {HTML_LANG_SCORE: ScoreBins(0.0, 1.0, 20)}
    marks_documents: ClassVar[bool] = True  # resiliparse sees each page inside each_document

    languages: list[str] = Field(..., min_length=1, description="The languages the pipeline "
                                 "keeps (ISO 639-1, as for langid).")
    min_other_score: float = Field(0.9, ge=0.0, le=1.0, description="Lowest score of another "
                                   "language that removes a page.")
    model: str | None = Field(None, description="fastText language-ID model, as for langid.")
    window_chars: int = Field(2000, gt=0, description="Characters per window, as for langid.")
    windows: int = Field(1, ge=1, description="Windows per long page, as for langid (one, the "
                         "page's start, is enough for a pre-filter).")
    timeout_s: float | None = Field(60.0, gt=0, description="Seconds one page may take (it "
                                    "runs in the segment's sandbox process); a page still "
                                    "running then fails with reason 'timeout'. null: no limit, "
                                    "no sandbox.")
    max_document_bytes: int | None = Field(4 << 20, gt=0, description="A page whose HTML has "
                                           "more bytes fails with reason 'too_large' before "
                                           "the stage sees it.")

    _langid: Any = None
    _extract: Any = None

    _check_model = field_validator("model")(checked_model)
    _check_languages = field_validator("languages")(normalised_languages)

    def thresholds(self) -> dict[str, list[float]]:
        return {HTML_LANG_SCORE: [self.min_other_score]}

    def side_inputs(self) -> list[str]:
        return [self.model] if self.model else []

    def requirements(self) -> dict[str, str]:
        return model_requirements(self.requires, self.model)

    def check(self) -> None:
        super().check()
        check_languages(self.model, {"languages": self.languages})

    def setup(self) -> None:
        from resiliparse.extract.html2text import extract_plain_text

        self._extract = extract_plain_text
        self._langid = LangId(model=self.model, window_chars=self.window_chars,
                              windows=self.windows)
        self._langid.setup()

    def main_text(self, page: str | None) -> str | None:
        if not page:
            return None
        return self._extract(page, main_content=True, alt_texts=False, links=False,
                             list_bullets=False, form_fields=False)

    def scores(self, batch: pa.Table) -> dict[str, pa.Array]:
        if self._langid is None:
            self.setup()
        texts = [self.main_text(page) for page in each_document(batch.column(TEXT).to_pylist())]
        langs, scores = self._langid.predict(texts)
        return {HTML_LANG: pa.array(langs, pa.string()),
                HTML_LANG_SCORE: pa.array(scores, pa.float64())}

    def rules(self, scores: dict[str, pa.Array]) -> dict[str, pa.Array]:
        lang, score = scores[HTML_LANG], scores[HTML_LANG_SCORE]
        other = pc.invert(pc.is_in(lang, pa.array(self.languages, pa.string())))
        sure = pc.greater_equal(score, self.min_other_score)
        return {"lang_clearly_other": pc.and_(pc.fill_null(other, False), sure)}
