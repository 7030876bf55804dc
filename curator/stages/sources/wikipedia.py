"""The ``wikipedia`` source: MediaWiki XML dumps -> one document per article (namespace 0),
wikitext turned into plain text with mwparserfromhell. Redirects, disambiguation pages and
pages of other namespaces are removed with a reason, not dropped.

mwparserfromhell can take minutes on a page (40 KB of unbalanced ``{{a|`` held it 225 s): each
page's conversion runs under ``timeout_s`` in the segment's sandbox process
(curator.runtime.worker.sandbox), and a page over ``max_page_chars`` fails before it."""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Iterator
from typing import ClassVar
from urllib.parse import quote

import pyarrow as pa
from fsspec.core import url_to_fs
from pydantic import Field

from curator.batch import (
    ID,
    REASON,
    TEXT,
    BatchResult,
    Failure,
    Shard,
    SourceBatch,
    split_by_reason,
)
from curator.io.files import list_shards
from curator.io.wikidump import DumpError, Page, SiteInfo, iter_pages, stream_offsets
from curator.runtime.worker.sandbox import each_document, run_sandboxed
from curator.stages.base import BatchStage, Source

MULTISTREAM = "multistream.xml.bz2"
RANGE_MARK = "#bytes="
COLUMNS = ("id", "text", "title", "url", "date", "lang")

# Template names (first letter upper-cased, underscores as spaces) that mark a disambiguation
# page; any name containing "disambiguation" or 曖昧さ回避 counts too.
DISAMBIGUATION_TEMPLATES = frozenset({
    "Disambiguation", "Disambig", "Dab", "Disamb", "DAB", "Hndis", "Geodis", "Numberdis",
    "Aimai", "曖昧", "人名の曖昧さ回避", "地名の曖昧さ回避",
})
_DISAMBIGUATION_WORDS = ("disambiguation", "曖昧さ回避")
_REDIRECT = re.compile(r"^\s*#(?:redirect|転送|リダイレクト)\s*:?\s*\[\[", re.I)
_INTERLANGUAGE = re.compile(r"^[a-z]{2,3}(?:-[a-z]+)*:")
_BLANK_LINES = re.compile(r"\n\s*\n\s*(?:\n\s*)*")
_SPACES = re.compile(r"[ \t]+")
_PAREN_OPEN = re.compile(r"([(\uff08])\s*(?:[,;\u3001\uff0c]\s*)+")
_PAREN_CLOSE = re.compile(r"(?:\s*[,;\u3001\uff0c])+\s*([)\uff09])")
_EMPTY_PARENS = re.compile(r"\s*[(\uff08]\s*[)\uff09]")
HEADING_MARK = "\x02"
INLINE_FIRST_ARG = frozenset({"nihongo", "nowrap", "nobold", "small", "小文字", "仮リンク",
                              "lang-ja", "en", "ill", "interlanguage link", "ruby"})
FILE_ALIASES = ("file", "image", "ファイル", "画像", "media")
CATEGORY_ALIASES = ("category", "カテゴリ")
REMOVED_TAGS = frozenset({"table", "ref", "references", "gallery", "imagemap", "timeline",
                          "graph", "templatedata", "score", "mapframe", "noinclude"})


def _template_name(name: str) -> str:
    name = name.strip().replace("_", " ")
    return name[:1].upper() + name[1:]


def is_disambiguation(code, site: SiteInfo) -> bool:
    """A disambiguation template ({{Disambiguation}}, {{Dab}}, {{曖昧さ回避}}, ...) or a
    disambiguation category link."""
    for template in code.filter_templates(recursive=False):
        name = _template_name(str(template.name))
        if name in DISAMBIGUATION_TEMPLATES or any(w in name.lower()
                                                   for w in _DISAMBIGUATION_WORDS):
            return True
    categories = _prefixes(site, 14, CATEGORY_ALIASES)
    for link in code.filter_wikilinks(recursive=False):
        prefix, _, rest = str(link.title).partition(":")
        if prefix.strip().lower() in categories and any(w in rest.lower()
                                                        for w in _DISAMBIGUATION_WORDS):
            return True
    return False


def _prefixes(site: SiteInfo, key: int, aliases: tuple[str, ...]) -> set[str]:
    return {site.namespaces.get(key, "").lower(), *aliases} - {""}


def wikitext_to_text(code, site: SiteInfo) -> str:
    """Plain text: templates, refs, tables, galleries, files, categories and interlanguage
    links removed (a few inline templates keep their text: {{lang}}, {{convert}}, ...);
    headings kept as lines, except those left with nothing under them; list items as lines;
    links as their text."""
    import mwparserfromhell

    files = _prefixes(site, 6, FILE_ALIASES)
    categories = _prefixes(site, 14, CATEGORY_ALIASES)
    namespaces = {n.lower() for n in site.namespaces.values() if n}
    for tag in code.filter_tags():
        if str(tag.tag).strip().lower() in REMOVED_TAGS:
            _remove(code, tag)
    for link in code.filter_wikilinks():
        title = str(link.title).strip()
        prefix = title.partition(":")[0].strip().lower() if ":" in title else ""
        if prefix in files or prefix in categories or (
                _INTERLANGUAGE.match(title) and prefix not in namespaces):
            _remove(code, link)
    for template in code.filter_templates(recursive=False):
        if (kept := _template_text(template)) is not None:
            with contextlib.suppress(ValueError):
                code.replace(template, kept)
    for heading in code.filter_headings(recursive=False):
        title = mwparserfromhell.parse(str(heading.title)).strip_code().strip()
        with contextlib.suppress(ValueError):
            code.replace(heading, f"{HEADING_MARK}{title}\n")
    text = code.strip_code(normalize=True, collapse=True)
    text = _EMPTY_PARENS.sub("", _PAREN_OPEN.sub("(", _PAREN_CLOSE.sub(")", text)))
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    return _BLANK_LINES.sub("\n\n", "\n".join(_drop_empty_sections(lines))).strip()


def _template_text(template) -> str | None:
    """The text an inline template shows, for the few kept; None for the others."""
    name = _template_name(str(template.name)).lower()
    args = [str(p.value).strip() for p in template.params if not p.showkey]
    if name in ("lang", "transl") and args:
        return args[-1]
    if name in INLINE_FIRST_ARG and args:
        return args[0]
    if name in ("convert", "cvt") and len(args) >= 2:
        return f"{args[0]} {args[1]}"
    return None


def _drop_empty_sections(lines: list[str]) -> list[str]:
    """Heading lines with a blank line before them; a heading with no text under it (before
    the next heading or the end) goes."""
    out: list[str] = []
    for i, line in enumerate(lines):
        if not line.startswith(HEADING_MARK):
            out.append(line)
            continue
        following = next((x for x in lines[i + 1:] if x), None)
        if following is not None and not following.startswith(HEADING_MARK):
            out += ["", line[len(HEADING_MARK):]]
    return out


def _remove(code, node) -> None:
    with contextlib.suppress(ValueError):  # inside something removed already
        code.remove(node)


class _Wikitext(BatchStage):
    """Wikitext -> plain text, one page per row (``text``); disambiguation pages and pages left
    without text removed with their reason, a page the parser fails on failed. The source's
    per-page work, run where ``timeout_s`` guards it."""

    marks_documents: ClassVar[bool] = True

    namespaces: dict[int, str] = Field(default_factory=dict)

    def process(self, batch: pa.Table) -> BatchResult:
        import mwparserfromhell

        site = SiteInfo(namespaces=self.namespaces)
        ids = batch.column(ID).to_pylist()
        texts: list[str] = []
        reasons: list[str | None] = []
        keep: list[bool] = []
        failed: list[Failure] = []
        for i, wikitext in enumerate(each_document(batch.column(TEXT).to_pylist())):
            try:
                code = mwparserfromhell.parse(wikitext)
                if is_disambiguation(code, site):
                    text, reason = "", "disambiguation"
                else:
                    text = wikitext_to_text(code, site)
                    reason = None if text else "no_text"
            except Exception as err:  # a parser bug must not end the shard
                failed.append(Failure(stage=self.name or "wikipedia", id=ids[i],
                                      reason="wikitext_error",
                                      error=f"wikitext_error: {type(err).__name__}: {err}"))
                keep.append(False)
                continue
            keep.append(True)
            texts.append(text)
            reasons.append(reason)
        table = batch.filter(pa.array(keep, pa.bool_()))
        table = table.set_column(table.column_names.index(TEXT), TEXT,
                                 pa.array(texts, pa.string()))
        result = split_by_reason(table, pa.array(reasons, pa.string()))
        result.failed = failed
        return result


class Wikipedia(Source):
    """Read MediaWiki XML dumps (.xml, .xml.bz2; local or fsspec), streamed page by page. A
    multistream dump (``*-multistream.xml.bz2``) beside its index
    (``*-multistream-index.txt.bz2``) is split into shards of ``streams_per_shard`` bz2
    streams; any other file is one shard. Keeps namespace 0; redirects, disambiguation pages
    and other namespaces are removed with their reason. Columns: id (``<dbname>:<page id>``),
    text, title, url, date (the revision's timestamp), lang."""

    type = "wikipedia"
    version = 2  # 2: the pages read before a cut in a bz2 stream are kept

    path: str | list[str] = Field(description="Dump file, glob or list of them.")
    streams_per_shard: int = Field(1000, gt=0, description="Streams (about 100 pages each) per "
                                   "shard of a multistream dump that has its index beside it.")
    max_page_chars: int = Field(4 << 20, gt=0, description="A page whose wikitext has more "
                                "characters fails with reason 'too_large' (only this much of "
                                "it is ever held in memory).")
    timeout_s: float | None = Field(60.0, gt=0, description="Seconds one page's conversion may "
                                    "take (in the segment's sandbox process); then it fails "
                                    "with reason 'timeout'. null: no limit, in the worker.")

    def shards(self) -> list[Shard]:
        shards = []
        for shard in list_shards(self.path):
            if "-index.txt" in shard.label:  # a multistream index matched by the same glob
                continue
            index = _index_of(shard.path)
            if index is None:
                shards.append(shard)
                continue
            offsets = stream_offsets(index)
            size = shard.size or url_to_fs(shard.path)[0].size(shard.path)
            header_end = offsets[0]
            starts = offsets[::self.streams_per_shard]
            for i, start in enumerate(starts):
                end = starts[i + 1] if i + 1 < len(starts) else size
                shards.append(Shard(index=0, path=f"{shard.path}{RANGE_MARK}{start}-{end}"
                                    f"-{header_end}", size=end - start,
                                    label=f"{shard.label}@{start}"))
        return [Shard(index=i, path=s.path, size=s.size, label=s.label)
                for i, s in enumerate(shards)]

    def read(self, shard: Shard, batch_bytes: int) -> Iterator[SourceBatch]:
        url, byte_range = _split_range(shard.path)
        stage = self.name or self.type
        site = SiteInfo()
        rows: list[dict] = []  # kept, before conversion: text holds the wikitext
        removed: list[dict] = []
        failed: list[Failure] = []
        size = 0
        try:
            for item in iter_pages(url, byte_range, self.max_page_chars):
                if isinstance(item, SiteInfo):
                    site = item
                    continue
                row, reason = self._document(item, site)
                if reason is None and item.text_chars > self.max_page_chars:
                    failed.append(Failure(
                        stage=stage, file=shard.label, offset=item.offset, id=row["id"],
                        reason="too_large", error=f"too_large: {item.text_chars} characters "
                        f"of wikitext, over max_page_chars={self.max_page_chars}"))
                elif reason is None:
                    rows.append({**row, "text": item.text, "offset": item.offset,
                                 "seq": len(rows) + len(removed)})
                    size += len(item.text)
                else:
                    removed.append({**row, "text": "", REASON: reason,
                                    "seq": len(rows) + len(removed)})
                if size >= batch_bytes or len(removed) + len(failed) >= 10_000:
                    yield self._converted(rows, removed, failed, site, shard)
                    rows, removed, failed, size = [], [], [], 0
        except DumpError as err:
            failed.append(Failure(stage=stage, error=f"{err}; the pages after it are lost",
                                  file=shard.label, reason="damaged_dump"))
        yield self._converted(rows, removed, failed, site, shard)

    def _document(self, page: Page, site: SiteInfo) -> tuple[dict, str | None]:
        """The page's row (without text) and why it is no article (None: it may be one)."""
        row = {"id": f"{site.dbname or 'wiki'}:{page.page_id}", "text": "",
               "title": page.title,
               "url": site.article_url_prefix + quote(page.title.replace(" ", "_"),
                                                      safe="/:()',!$*@~-"),
               "date": page.timestamp, "lang": site.lang}
        if page.namespace != 0:
            return row, "not_article"
        if page.redirect or _REDIRECT.match(page.text):
            return row, "redirect"
        return row, None

    def _converted(self, rows: list[dict], removed: list[dict], failed: list[Failure],
                   site: SiteInfo, shard: Shard) -> SourceBatch:
        """The articles' wikitext turned into text (guarded, see the module docstring)."""
        if rows:
            stage = self.name or self.type
            work = _Wikitext(name=stage, namespaces=site.namespaces, timeout_s=self.timeout_s)
            pages = pa.table({ID: [str(i) for i in range(len(rows))],  # (ids may repeat)
                              TEXT: [r["text"] for r in rows]})
            result = run_sandboxed(work, stage, pages) if self.timeout_s else work.process(pages)
            for failure in result.failed:
                row = rows[int(failure.id)]
                failure.file, failure.offset, failure.id = shard.label, row["offset"], row["id"]
            gone = [] if result.removed is None else result.removed.to_pylist()
            removed = sorted(removed + [{**rows[int(r[ID])], "text": "", REASON: r[REASON]}
                                        for r in gone], key=lambda r: r["seq"])  # page order
            failed = failed + result.failed
            rows = [{**rows[int(i)], "text": text} for i, text in
                    zip(result.kept.column(ID).to_pylist(), result.kept.column(TEXT).to_pylist(),
                        strict=True)]
        return _batch(rows, removed, failed, Counter())


def _index_of(url: str) -> str | None:
    """The index beside a multistream dump, if there is one."""
    if not url.endswith(MULTISTREAM):
        return None
    fs, path = url_to_fs(url)
    stem = path[: -len(MULTISTREAM)]
    for suffix in ("multistream-index.txt.bz2", "multistream-index.txt"):
        if fs.exists(stem + suffix):
            found = stem + suffix
            return found if "://" not in url else fs.unstrip_protocol(found)
    return None


def _split_range(path: str) -> tuple[str, tuple[int, int, int] | None]:
    url, mark, spec = path.partition(RANGE_MARK)
    if not mark:
        return url, None
    start, end, header_end = (int(x) for x in spec.split("-"))
    return url, (start, end, header_end)


def _batch(rows: list[dict], removed: list[dict], failed: list[Failure],
           notes: Counter) -> SourceBatch:
    schema = pa.schema([(name, pa.string()) for name in COLUMNS])
    table = pa.Table.from_pylist(rows, schema=schema)
    gone = pa.Table.from_pylist(removed, schema=schema.append(pa.field(REASON, pa.string())))
    return SourceBatch(table, failed, notes, gone if gone.num_rows else None)

