"""``extract_html``: a page's HTML (``text``) -> its main text, with its ``title``.

Extractors: trafilatura (default; ``favor_precision`` for fewer boilerplate lines), resiliparse
(``extract_plain_text`` with ``main_content``: much faster, less precise) and jusText (its
stoplist chosen from the ``lang`` column, English where absent or unknown). A list is tried in
order until one returns text. A page that yields no text is removed (reason ``no_text``).
Pages over ``max_document_bytes`` (default 4 MB) fail with reason ``too_large`` before any
extractor sees them; each page runs under ``timeout_s`` (default 60 s) in the segment's sandbox
process, which is killed when it takes longer (reason ``timeout``).
"""

from __future__ import annotations

import html
import re
from typing import ClassVar, Literal

import pyarrow as pa
from pydantic import Field

from curator.batch import ID, TEXT, BatchResult, Failure, split_by_reason
from curator.runtime.worker.sandbox import each_document
from curator.stages.base import BatchStage

Extractor = Literal["trafilatura", "resiliparse", "justext"]
TITLE = "title"
LANG = "lang"
TITLE_SCAN = 64 << 10
_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.I | re.S)
_SPACES = re.compile(r"\s+")
# ISO 639-1 -> jusText stoplist name (the languages of its stoplists that have a 639-1 code).
_JUSTEXT_LISTS = dict(pair.split(":") for pair in (  # noqa: SIM905
    "af:Afrikaans sq:Albanian ar:Arabic an:Aragonese hy:Armenian az:Azerbaijani eu:Basque "
    "be:Belarusian bn:Bengali bs:Bosnian br:Breton bg:Bulgarian ca:Catalan cv:Chuvash "
    "hr:Croatian cs:Czech da:Danish nl:Dutch en:English eo:Esperanto et:Estonian fi:Finnish "
    "fr:French gl:Galician ka:Georgian de:German el:Greek gu:Gujarati ht:Haitian he:Hebrew "
    "hi:Hindi hu:Hungarian is:Icelandic io:Ido ig:Igbo id:Indonesian ga:Irish it:Italian "
    "jv:Javanese kn:Kannada kk:Kazakh ko:Korean ku:Kurdish ky:Kyrgyz la:Latin lv:Latvian "
    "lt:Lithuanian lb:Luxembourgish mk:Macedonian ms:Malay ml:Malayalam mt:Maltese mr:Marathi "
    "ne:Nepali nb:Norwegian_Bokmal no:Norwegian_Bokmal nn:Norwegian_Nynorsk oc:Occitan "
    "fa:Persian pl:Polish pt:Portuguese qu:Quechua ro:Romanian ru:Russian sr:Serbian "
    "sh:Serbo_Croatian sk:Slovak sl:Slovenian es:Spanish su:Sundanese sw:Swahili sv:Swedish "
    "tl:Tagalog ta:Tamil te:Telugu tr:Turkish tk:Turkmen uk:Ukrainian ur:Urdu uz:Uzbek "
    "vi:Vietnamese vo:Volapuk wa:Walloon cy:Welsh fy:West_Frisian yo:Yoruba"
).split())


def page_title(page: str) -> str | None:
    """The text of the page's ``<title>`` (entities decoded, spaces collapsed), or None."""
    found = _TITLE.search(page, 0, TITLE_SCAN)
    if not found:
        return None
    title = _SPACES.sub(" ", html.unescape(found.group(1))).strip()
    return title or None


class ExtractHtml(BatchStage):
    """Replace ``text`` (HTML) with the page's main text and add ``title``; pages that yield
    no text are removed (reason ``no_text``)."""

    type = "extract_html"
    requires = {"trafilatura": "extract", "resiliparse": "extract", "justext": "extract"}
    checkpoint: ClassVar[bool] = True
    marks_documents: ClassVar[bool] = True  # the extractors see each page inside each_document

    extractor: Extractor | list[Extractor] = Field(
        "trafilatura", description="trafilatura, resiliparse or justext; or a list tried in "
        "order until one returns text.")
    favor_precision: bool = Field(False, description="trafilatura: keep only the surest main "
                                  "text (fewer boilerplate lines, some text lost).")
    favor_recall: bool = Field(False, description="trafilatura: keep more text when unsure.")
    include_tables: bool = Field(True, description="trafilatura: keep the text of tables.")
    include_comments: bool = Field(False, description="trafilatura: keep user comments.")
    fast: bool = Field(False, description="trafilatura: skip its fallback extractors "
                       "(readability, jusText): faster, a little less recall.")
    min_chars: int = Field(1, ge=1, description="Extracted text shorter than this (after "
                           "stripping) counts as no text.")
    max_document_bytes: int | None = Field(
        4 << 20, gt=0, description="A page whose HTML has more bytes fails with reason "
        "'too_large' before extraction (extractors can take minutes on huge pages).")
    timeout_s: float | None = Field(
        60.0, gt=0, description="Seconds one page may take (it runs in the segment's sandbox "
        "process); a page still running then fails with reason 'timeout'. null: no limit, no "
        "sandbox.")

    def requirements(self) -> dict[str, str]:
        return {name: "extract" for name in self._extractors()}

    def _extractors(self) -> list[str]:
        return [self.extractor] if isinstance(self.extractor, str) else list(self.extractor)

    def setup(self) -> None:
        self._functions = [getattr(self, f"_{name}") for name in self._extractors()]
        if "justext" in self._extractors():
            import justext

            self._stoplists: dict[str, frozenset[str]] = {}
            self._justext = justext
        if "resiliparse" in self._extractors():
            from resiliparse.extract.html2text import extract_plain_text

            self._resiliparse_extract = extract_plain_text
        if "trafilatura" in self._extractors():
            import trafilatura

            self._trafilatura_extract = trafilatura.extract

    def _trafilatura(self, page: str, lang: str | None) -> str | None:
        return self._trafilatura_extract(
            page, favor_precision=self.favor_precision, favor_recall=self.favor_recall,
            include_tables=self.include_tables, include_comments=self.include_comments,
            no_fallback=self.fast)

    def _resiliparse(self, page: str, lang: str | None) -> str | None:
        return self._resiliparse_extract(page, main_content=True, alt_texts=False,
                                         comments=self.include_comments)

    def _justext(self, page: str, lang: str | None) -> str | None:
        name = _JUSTEXT_LISTS.get((lang or "en").split("-")[0].lower(), "English")
        if name not in self._stoplists:
            self._stoplists[name] = self._justext.get_stoplist(name)
        paragraphs = self._justext.justext(page, self._stoplists[name])
        return "\n".join(p.text for p in paragraphs if not p.is_boilerplate)

    def process(self, batch: pa.Table) -> BatchResult:
        if not hasattr(self, "_functions"):
            self.setup()
        pages = batch.column(TEXT).to_pylist()
        ids = batch.column(ID).to_pylist()
        langs = batch.column(LANG).to_pylist() if LANG in batch.column_names \
            else [None] * len(pages)
        titles = batch.column(TITLE).to_pylist() if TITLE in batch.column_names \
            else [None] * len(pages)
        texts: list[str | None] = []
        failed: list[Failure] = []
        notes: dict[str, int] = {}
        keep = []
        for i, page in enumerate(each_document(pages)):
            try:
                text, used = self._extract(page, langs[i])
            except Exception as err:  # third-party parsers raise anything on hostile markup
                failed.append(Failure(stage=self.name or self.type, id=ids[i],
                                      reason="extract_error",
                                      error=f"extract_error: {type(err).__name__}: {err}"))
                continue
            keep.append(i)
            texts.append(text)
            if used:
                notes[f"extracted_{used}"] = notes.get(f"extracted_{used}", 0) + 1
            titles[i] = titles[i] or page_title(page)
        if failed:
            index = pa.array(keep, pa.int64())
            batch = batch.take(index)
            titles = [titles[i] for i in keep]
        table = batch.set_column(batch.column_names.index(TEXT), TEXT,
                                 pa.array([t or "" for t in texts], pa.string()))
        title_column = pa.array(titles, pa.string())
        if TITLE in table.column_names:
            table = table.set_column(table.column_names.index(TITLE), TITLE, title_column)
        else:
            table = table.append_column(TITLE, title_column)
        reasons = pa.array([None if t else "no_text" for t in texts], pa.string())
        result = split_by_reason(table, reasons)
        result.failed, result.notes = failed, notes
        return result

    def _extract(self, page: str, lang: str | None) -> tuple[str | None, str | None]:
        """The first extractor's text that is long enough, and that extractor's name."""
        for function in self._functions:
            text = function(page, lang)
            text = text.strip() if text else ""
            if len(text) >= self.min_chars:
                return text, function.__name__.lstrip("_")
        return None, None
