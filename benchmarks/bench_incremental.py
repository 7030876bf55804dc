"""Incremental runs on the product path: what a rerun into the same run directory (no
``--force``) costs against a from-scratch run of the same final configuration, and whether it
publishes the same bytes (docs/reuse.md).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_incremental.py [--mb 200] [--files 8]

Every run is ``.venv/bin/curate run pipelines/sample.yaml --output DIR --set
read_warc.path=INPUT/*.warc.gz [--set ...]`` as a subprocess (the sample pipeline as shipped:
read_warc -> langid_html -> extract_html (trafilatura) -> langid -> clean -> heuristic_filter
-> exact_dedup -> fuzzy_dedup -> decontaminate -> write_parquet -> tokenize; Dask, 2 workers),
measured whole: wall seconds, and CPU seconds of the whole process tree (the Dask workers hang
off multiprocessing's forkserver, which outlives ``curate``: this process is the child
subreaper and reaps every orphan before it reads ``RUSAGE_CHILDREN``; ``bench_guard_cost``'s
``measure``).

The runs, in this order (R is one run directory, rerun without --force):

* S6: R from scratch on 6 of the ``--files`` WARC files; the two left out sort between others
  (for 8 files, ``crawl-02`` and ``crawl-05``).
* (a) the 2 files added (hard links into the input folder, so their path, size and mtime are
  what a copy would have kept), R rerun; against S8, all files from scratch in another folder.
* (b) R rerun with a second tokenizer (``--set tokenize.tokenizer=PATH``: ``curate tokenizer
  train data/sample/*.jsonl.gz --vocab-size 4096``, cached); against that configuration from
  scratch.
* (c) R rerun with the second tokenizer and a heuristic threshold changed (``--set
  'heuristic_filter.overrides={gopher_quality.min_words: N}'``); against that configuration from
  scratch.

For each rerun: its published files against the from-scratch run's (``tests/published.py``:
``published_differences``, byte for byte), what ``curate run`` printed about reuse (the lines
after "shards run"), ``stats.json``'s ``reuse`` entry and ``extract_html``'s seconds (a stage a
rerun did not run keeps the seconds of the run that did: its counts are carried over), and
``store_bytes`` (what reuse keeps on disk in ``_store/``) against the input's size.

The input (generated once, cached under ``--dir``/warc-<MB>mb-<files>f-seed<seed>/ with a
``manifest.json``; regenerated only when a file is missing or its size differs): ``--files``
WARC files (``tests/warc_builder.write_warc``) of about ``--mb`` MB in all, gzipped on disk.
Each page is a real page from ../shared/corpus (the Zyte article benchmark, trafilatura's
evaluation set, the HTML responses of the real WARC files; for Japanese pages the Japanese news,
blog and readability pages) used as a template: its head, navigation, sidebars and footer kept,
its main container (the element with the most paragraph children) emptied and given the page's
own body, its title replaced. A template is used only if trafilatura, run on it with a probe
body, returns the probe body and little else (so the template's own article and boilerplate do
not leak into every page made from it). How the pages are unique: each body is 5 to 15
paragraphs drawn without replacement, in random order, from a pool of real paragraphs
(English: the Project Gutenberg books without their licence header and footer, the State of the
Union and inaugural addresses, the movie reviews cut into paragraphs of 5 sentences; Japanese:
JaQuAD's Wikipedia paragraphs and Aozora Bunko works, one paragraph per line), with a seeded
RNG; a combination of paragraphs already used is drawn again, so no two bodies are the same
set. The pools hold about 30,000 English and 17,600 Japanese paragraphs, so bodies hardly
overlap: in the default input (200 MB, seed 0: 8014 pages, 7765 distinct bodies) 76,039 pairs
of bodies share one paragraph, 138 pairs two, none more, far from a near-duplicate (fuzzy_dedup
removes none). About 15 % of pages are Japanese. Planted: about
3 % of pages are exact copies (the same HTML under another URL) of a page drawn at random from
the pages before it, most in another file, for exact dedup to find.
"""

from __future__ import annotations

import argparse
import compileall
import csv
import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import harness

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_guard_cost import become_subreaper, measure

from tests.published import published_differences
from tests.warc_builder import write_warc

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "pipelines" / "sample.yaml"
BODY = "CURATORBENCHBODYSLOT"
TITLE = "CURATORBENCHTITLESLOT"
JA_SHARE = 0.15
DUP_SHARE = 0.03
PARAGRAPHS = (5, 15)
PROBES = 8
CONTENT_TYPE = "text/html; charset=utf-8"
MAX_TEMPLATE_BYTES = 600_000
LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d ")
# Aozora Bunko's notation (fullwidth characters, escaped): the source note that ends a work
# ("teihon:"), ruby in double angle brackets, the ruby start mark (a fullwidth bar), editor's
# notes in fullwidth brackets opened by a fullwidth number sign
AOZORA_SOURCE = "\u5e95\u672c\uff1a"
AOZORA_MARKUP = re.compile("\u300a[^\u300b]*\u300b|\uff3b\uff03[^\uff3d]*\uff3d|\uff5c")


# ------------------------------------------------------------------ paragraphs


def _gunzip(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes())


def _words(text: str) -> int:
    return len(text.split())


def _gutenberg(path: Path) -> list[str]:
    text = _gunzip(path).decode("utf-8-sig", "replace")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    start = re.search(r"\*\*\* ?START OF[^\n]*", text)
    end = re.search(r"\*\*\* ?END OF[^\n]*", text)
    text = text[start.end() if start else 0:end.start() if end else len(text)]
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]


def _speeches(path: Path) -> list[str]:
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"].replace("\r\n", "\n")
            out += [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
    return out


def _reviews(path: Path) -> list[str]:
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            sentences = [s.strip() for s in json.loads(line)["text"].splitlines() if s.strip()]
            out += [" ".join(sentences[i:i + 5]) for i in range(0, len(sentences), 5)]
    return out


def _jaquad(path: Path) -> list[str]:
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            out += ["".join(s.strip() for s in p.splitlines()) for p in text.split("\n\n")]
    return out


def _aozora(path: Path) -> list[str]:
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"].replace("\r\n", "\n")
            parts = text.split("-" * 20)
            body = parts[-1] if len(parts) >= 3 else text  # after the notation header
            body = body.split(AOZORA_SOURCE)[0]
            body = AOZORA_MARKUP.sub("", body)
            out += [p.strip().strip("\u3000") for p in body.splitlines()]
    return out


def paragraph_pools(corpus: Path) -> dict[str, list[str]]:
    """Real paragraphs by language, each once (English 30-300 words, Japanese 100-1500
    characters), in a fixed order."""
    text = corpus / "text_corpus"
    en: list[str] = []
    for path in sorted((text / "gutenberg").glob("*.txt.gz")):
        en += _gutenberg(path)
    for name in ("inaugural", "state_union"):
        en += _speeches(text / "speeches" / f"{name}.jsonl.gz")
    en += _reviews(text / "movie_reviews" / "movie_reviews.jsonl.gz")
    ja = _jaquad(corpus / "japanese" / "wiki_paragraphs" / "jaquad_train_contexts.jsonl.gz")
    ja += _aozora(corpus / "japanese" / "aozora" / "aozora_works.jsonl.gz")
    return {"en": list(dict.fromkeys(p for p in en if 30 <= _words(p) <= 300)),
            "ja": list(dict.fromkeys(p for p in ja if 100 <= len(p) <= 1500))}


# ------------------------------------------------------------------ templates


@dataclass
class Template:
    source: str  # corpus file (and record)
    lang: str  # the language of the bodies it gets
    host: str
    head: str  # up to the body slot, TITLE in the title
    tail: str


def _template_pages(corpus: Path) -> list[tuple[str, str, str, bytes]]:
    """(source, language of the bodies, url, HTML bytes) of every real page in the corpus."""
    from warcio.archiveiterator import ArchiveIterator

    pages = []
    zyte = corpus / "article_extraction_benchmark"
    truth = json.loads((zyte / "ground-truth.json").read_text())
    for path in sorted((zyte / "html").glob("*.html.gz")):
        url = truth.get(path.name.split(".")[0], {}).get("url", "https://example.com/")
        pages.append((str(path.relative_to(corpus)), "en", url, _gunzip(path)))
    tra = corpus / "trafilatura_eval"
    urls = {v["file"]: k for k, v in json.loads((tra / "evaldata.json").read_text()).items()}
    for path in sorted((tra / "html").glob("*.gz")):
        pages.append((str(path.relative_to(corpus)), "en",
                      urls.get(path.name[:-3], "https://example.com/"), _gunzip(path)))
    for path in sorted((corpus / "warc").glob("[!e]*/*.warc.gz")):  # not edge_cases/
        with open(path, "rb") as f:
            for i, record in enumerate(ArchiveIterator(f)):
                http = record.http_headers
                if record.rec_type != "response" or http is None \
                        or "html" not in (http.get_header("Content-Type") or "") \
                        or not http.get_statuscode().startswith("2"):
                    continue
                pages.append((f"{path.relative_to(corpus)}#{i}", "en",
                              record.rec_headers.get_header("WARC-Target-URI") or "",
                              record.content_stream().read()))
    html = corpus / "japanese" / "html"
    with open(html / "news_blogs_2021" / "index.tsv", encoding="utf-8") as f:
        index = {row["file"]: row["url"] for row in csv.DictReader(f, delimiter="\t")}
    for path in sorted((html / "news_blogs_2021" / "html").glob("*.gz")):
        pages.append((str(path.relative_to(corpus)), "ja",
                      index.get(path.name, "https://example.jp/"), _gunzip(path)))
    for path in [*sorted((html / "readability").glob("*/source.html.gz")),
                 *sorted((html / "trafilatura").glob("*.html.gz")),
                 *sorted((html / "uzushio").glob("*.html.gz"))]:
        pages.append((str(path.relative_to(corpus)), "ja", "https://example.jp/",
                      _gunzip(path)))
    return pages


def _slotted(payload: bytes) -> tuple[str, str] | None:
    """The page with its main container emptied: (before the body slot, after it), the title
    a slot too; None when no container of paragraphs is found."""
    import lxml.html

    from curator.io.charset import decode_html

    text = decode_html(payload).utf8.decode("utf-8", "replace")
    try:
        doc = lxml.html.document_fromstring(text)
    except (ValueError, lxml.etree.ParserError):
        return None
    best, most = None, 1
    for el in doc.iter():
        if not isinstance(el.tag, str):
            continue
        n = sum(1 for c in el if c.tag == "p" and len(c.text_content().strip()) > 40)
        if n > most:
            best, most = el, n
    if best is None:
        return None
    for meta in doc.xpath("//meta[@charset] | //meta[@http-equiv]"):  # the page is UTF-8 now
        if meta.get("charset") is not None or "charset" in (meta.get("content") or "").lower():
            meta.getparent().remove(meta)
    for child in list(best):
        best.remove(child)
    best.text = BODY
    titles = doc.xpath("//title")
    if titles:
        for child in list(titles[0]):
            titles[0].remove(child)
        titles[0].text = TITLE
    else:
        heads = doc.xpath("//head")
        if not heads:
            return None
        title = lxml.html.Element("title")
        title.text = TITLE
        heads[0].insert(0, title)
    html = "<!DOCTYPE html>\n" + lxml.html.tostring(doc, encoding="unicode")
    head, sep, tail = html.partition(BODY)
    return (head, tail) if sep and BODY not in tail else None


def build_templates(corpus: Path, pools: dict[str, list[str]]) -> tuple[list[Template], dict]:
    """The corpus pages that pass as templates: with a probe body of real paragraphs in the
    slot, trafilatura (as extract_html calls it) returns at least 7 of the 8 probe paragraphs
    and at most 20 % + 400 characters more."""
    import trafilatura

    out, seen = [], {"pages": 0, "no_container": 0, "leaks": 0, "too_large": 0}
    for source, lang, url, payload in _template_pages(corpus):
        seen["pages"] += 1
        if len(payload) > MAX_TEMPLATE_BYTES:
            seen["too_large"] += 1
            continue
        slotted = _slotted(payload)
        if slotted is None:
            seen["no_container"] += 1
            continue
        probe = pools[lang][:PROBES]
        body = _body_html(probe)
        page = slotted[0].replace(TITLE, "probe") + body + slotted[1]
        got = trafilatura.extract(page, favor_precision=False, favor_recall=False,
                                  include_tables=True, include_comments=False) or ""
        found = sum(p[:50] in got or p[:50].replace(" ", "") in got.replace(" ", "")
                    for p in probe)
        if found < PROBES - 1 or len(got) > 1.2 * sum(map(len, probe)) + 400:
            seen["leaks"] += 1
            continue
        host = urlsplit(url).hostname or ("example.jp" if lang == "ja" else "example.com")
        out.append(Template(source, lang, host, *slotted))
    seen["kept_en"] = sum(t.lang == "en" for t in out)
    seen["kept_ja"] = sum(t.lang == "ja" for t in out)
    return out, seen


# ------------------------------------------------------------------ pages


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _body_html(paragraphs: list[str]) -> str:
    return "\n".join(f"<p>{_escape(p)}</p>" for p in paragraphs)


@dataclass(frozen=True)
class Recipe:
    lang: str
    template: int
    paragraphs: tuple[int, ...]


class Pages:
    """The seeded sequence of pages: ``next()`` gives (url, HTML bytes, is a planted copy)."""

    def __init__(self, templates: list[Template], pools: dict[str, list[str]], seed: int):
        self.templates, self.pools = templates, pools
        self.by_lang = {lang: [i for i, t in enumerate(templates) if t.lang == lang]
                        for lang in pools}
        self.rng = random.Random(seed)
        self.recipes: list[Recipe] = []
        self.used: set[tuple[str, frozenset[int]]] = set()
        self.counts = {"pages": 0, "en": 0, "ja": 0, "copies": 0, "redrawn": 0}

    def _new(self) -> Recipe:
        lang = "ja" if self.rng.random() < JA_SHARE else "en"
        while True:
            k = self.rng.randint(*PARAGRAPHS)
            chosen = tuple(self.rng.sample(range(len(self.pools[lang])), k))  # random order
            if (lang, frozenset(chosen)) not in self.used:
                break
            self.counts["redrawn"] += 1
        self.used.add((lang, frozenset(chosen)))
        return Recipe(lang, self.rng.choice(self.by_lang[lang]), chosen)

    def render(self, recipe: Recipe) -> bytes:
        paragraphs = [self.pools[recipe.lang][i] for i in recipe.paragraphs]
        first = paragraphs[0]
        title = " ".join(first.split()[:10]) if recipe.lang == "en" else first[:30]
        t = self.templates[recipe.template]
        return (t.head.replace(TITLE, _escape(title)) + _body_html(paragraphs)
                + t.tail).encode("utf-8")

    def next(self) -> tuple[str, bytes, bool]:
        n = len(self.recipes)
        copy = n > 0 and self.rng.random() < DUP_SHARE
        recipe = self.recipes[self.rng.randrange(n)] if copy else self._new()
        self.recipes.append(recipe)
        self.counts["pages"] += 1
        self.counts[recipe.lang] += 1
        self.counts["copies"] += copy
        url = f"https://{self.templates[recipe.template].host}/p/{n:07d}"
        return url, self.render(recipe), copy


def generate(folder: Path, corpus: Path, files: int, mb: float, seed: int) -> dict:
    """Write ``files`` WARC files of about ``mb`` MB in all (2 % over) into ``folder``; returns
    the manifest (also written as manifest.json)."""
    started = time.perf_counter()
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    pools = paragraph_pools(corpus)
    templates, template_counts = build_templates(corpus, pools)
    if not all(any(t.lang == lang for t in templates) for lang in pools):
        raise SystemExit(f"no template for a language: {template_counts}")
    pages = Pages(templates, pools, seed)
    target = mb * 1e6 * 1.02
    # bytes a page takes in a gzipped WARC, first from a sample (record headers: ~600 bytes)
    sample = Pages(templates, pools, seed + 1)
    per_page = sum(len(zlib.compress(sample.next()[1], 6)) + 600 for _ in range(100)) / 100
    written, listing = 0, []
    for i in range(files):
        n = max(1, round((target - written) / (files - i) / per_page))
        rows = [pages.next() for _ in range(n)]
        path = folder / f"crawl-{i:02d}.warc.gz"
        write_warc(path, [(url, payload, CONTENT_TYPE) for url, payload, _ in rows])
        size = path.stat().st_size
        written += size
        listing.append({"name": path.name, "bytes": size, "pages": n,
                        "copies": sum(c for _, _, c in rows)})
        per_page = written / sum(f["pages"] for f in listing)
        print(f"  {path.name}: {n} pages, {size / 1e6:.1f} MB", flush=True)
    manifest = {"seed": seed, "mb": mb, "files": listing, "bytes": written,
                "pages": pages.counts, "pools": {k: len(v) for k, v in pools.items()},
                "templates": template_counts, "seconds": time.perf_counter() - started}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def cached_input(folder: Path, corpus: Path, files: int, mb: float, seed: int) -> dict:
    manifest_path = folder / "manifest.json"
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text())
        if all((folder / f["name"]).is_file()
               and (folder / f["name"]).stat().st_size == f["bytes"] for f in manifest["files"]):
            print(f"input: cached in {folder}", flush=True)
            return manifest
    print(f"input: generating {files} WARC files, {mb:g} MB, into {folder}", flush=True)
    manifest = generate(folder, corpus, files, mb, seed)
    print(f"  {manifest['pages']} pages in {manifest['seconds']:.0f} s", flush=True)
    return manifest


def second_tokenizer(folder: Path, curate: Path, vocab: int) -> Path:
    """A tokenizer other than the sample's (vocabulary ``vocab``, same training text), cached."""
    out = folder / f"tokenizer-{vocab}"
    if not (out / "tokenizer.json").is_file():
        inputs = [str(p) for p in sorted((ROOT / "data" / "sample").glob("*.jsonl.gz"))]
        subprocess.run([str(curate), "tokenizer", "train", *inputs, "--vocab-size", str(vocab),
                        "--output", str(out)], check=True, cwd=ROOT)
    return out / "tokenizer.json"


# ------------------------------------------------------------------ runs


@dataclass
class Run:
    name: str
    run_dir: Path
    sets: list[str]
    wall: float = 0.0
    cpu: float = 0.0
    stats: dict = field(default_factory=dict)
    printed: list[str] = field(default_factory=list)  # the CLI's lines from "shards run" on

    @property
    def store_bytes(self) -> int:
        return int(self.stats.get("store_bytes", 0))

    def stage(self, name: str) -> dict:
        return next((s for s in self.stats.get("stages", []) if s["name"] == name), {})


def reuse_printed(log: str) -> list[str]:
    """What ``curate run`` printed about reuse: the "shards run" line and the ones after it,
    without the log lines and the output and report paths."""
    lines = log.splitlines()
    start = next((i for i, line in enumerate(lines) if " shards run, " in line), None)
    if start is None:
        return []
    return [line.rstrip() for line in lines[start:]
            if line.strip() and not LOG_LINE.match(line)
            and not line.startswith(("Megatron shards", "report: "))]


def tree_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) \
        if folder.is_dir() else 0


def files_seen(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_ino, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))
            if p.is_file()}


def ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "n/a"


def reuse_summary(stats: dict) -> list[str]:
    """stats.json's reuse entry, one line per segment."""
    out = []
    for seg, entry in stats.get("reuse", {}).items():
        if "phases" in entry:
            phases = entry["phases"]
            done = sum(v["reused"] for v in phases.values())
            tasks = sum(v["tasks"] for v in phases.values())
            out.append(f"{seg}: phases' tasks reused {done}/{tasks} ("
                       + ", ".join(f"{k} {v['reused']}/{v['tasks']}" for k, v in phases.items())
                       + ")")
        else:
            extra = {k: v for k, v in entry.items() if k not in ("reused", "ran", "stages_ran")}
            out.append(f"{seg}: shards reused {entry.get('reused')}, ran {entry.get('ran')}; "
                       f"stages ran (shards): {json.dumps(entry.get('stages_ran', {}))}"
                       + (f"; {json.dumps(extra)}" if extra else ""))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=200,
                    help="gzipped WARC input, MB in all (generated once, cached)")
    ap.add_argument("--files", type=int, default=8, help="WARC files (at least 4)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-words", type=int, default=500,
                    help="case (c): gopher_quality.min_words (the preset's default: 50)")
    ap.add_argument("--vocab", type=int, default=4096,
                    help="case (b): the second tokenizer's vocabulary (the sample's: 8192)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="unmeasured runs of the sample pipeline on its bundled WARCs first")
    ap.add_argument("--corpus", default=os.environ.get("CURATOR_CORPUS",
                                                       str(ROOT.parent / "shared" / "corpus")))
    ap.add_argument("--dir", default="bench-data/incremental",
                    help="cache (input, tokenizer) and run folders")
    ap.add_argument("--keep", action="store_true", help="keep the run folders")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results_incremental.md"))
    args = ap.parse_args()
    if args.files < 4:
        raise SystemExit("--files: at least 4 (two left out between others)")
    root = Path(args.dir).resolve()
    corpus = Path(args.corpus)
    curate = Path(sys.executable).parent / "curate"
    if not curate.is_file():
        raise SystemExit(f"no {curate}: install the checkout (pip install -e .)")

    reaper = become_subreaper()
    # as bench_e2e and bench_guard_cost: curator's modules byte-compiled, as installed
    compileall.compile_dir(str(ROOT / "curator"), quiet=1)
    cache = root / f"warc-{args.mb:g}mb-{args.files}f-seed{args.seed}"
    manifest = cached_input(cache, corpus, args.files, args.mb, args.seed)
    tokenizer = second_tokenizer(root, curate, args.vocab)
    names = [f["name"] for f in manifest["files"]]
    late = sorted({names[args.files // 4], names[(args.files * 5) // 8]})
    early = [n for n in names if n not in late]
    input_dir, runs_dir = root / "input", root / "runs"
    for folder in (input_dir, runs_dir):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    for name in early:
        os.link(cache / name, input_dir / name)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    base = [f"read_warc.path={input_dir}/*.warc.gz"]
    tok = [f"tokenize.tokenizer={tokenizer}"]
    threshold = [f"heuristic_filter.overrides={{gopher_quality.min_words: {args.min_words}}}"]

    def curate_run(name: str, run_dir: Path, sets: list[str], config: Path = CONFIG) -> Run:
        cmd = [str(curate), "run", str(config), "--output", str(run_dir)]
        for item in sets:
            cmd += ["--set", item]
        log = runs_dir / f"{name}.log"
        wall, cpu, _, rc = measure(cmd, env, log)
        text = log.read_text(errors="replace")
        if rc:
            raise SystemExit(f"curate run ({name}) failed, rc {rc}: {' '.join(cmd)}\n"
                             f"{text[-4000:]}")
        run = Run(name, run_dir, sets, wall, cpu,
                  json.loads((run_dir / "stats.json").read_text()), reuse_printed(text))
        print(f"{name:10s}: {wall:7.1f} s wall, {cpu:7.1f} CPU-s, "
              f"{run.stats['stages'][0]['in']} documents read, "
              f"store {run.store_bytes / 1e6:.1f} MB", flush=True)
        return run

    load0 = os.getloadavg()
    print(f"input: {len(names)} files, {manifest['bytes'] / 1e6:.1f} MB, "
          f"{manifest['pages']['pages']} pages; S6 leaves out {', '.join(late)}", flush=True)
    for i in range(args.warmup):
        curate_run(f"warmup-{i}", runs_dir / f"warmup-{i}", [])
        shutil.rmtree(runs_dir / f"warmup-{i}")

    r_dir = runs_dir / "R"
    runs: dict[str, Run] = {}
    extract_before: dict[str, float] = {}
    kept: dict[str, bool] = {}
    differ: dict[str, list[str]] = {}
    runs["S6"] = curate_run("S6", r_dir, base)
    for name in late:
        os.link(cache / name, input_dir / name)
    runs["a"] = curate_run("a", r_dir, base)
    runs["S8"] = curate_run("S8", runs_dir / "scratch-a", base)
    differ["a"] = published_differences(r_dir, runs["S8"].run_dir)
    if not args.keep and not differ["a"]:
        shutil.rmtree(runs["S8"].run_dir)

    extract_before["b"] = runs["a"].stage("extract_html").get("seconds", 0.0)
    parquet_before = files_seen(r_dir / "write_parquet")
    runs["b"] = curate_run("b", r_dir, base + tok)
    kept["b"] = files_seen(r_dir / "write_parquet") == parquet_before
    runs["Sb"] = curate_run("Sb", runs_dir / "scratch-b", base + tok)
    differ["b"] = published_differences(r_dir, runs["Sb"].run_dir)
    if not args.keep and not differ["b"]:
        shutil.rmtree(runs["Sb"].run_dir)

    extract_before["c"] = runs["b"].stage("extract_html").get("seconds", 0.0)
    runs["c"] = curate_run("c", r_dir, base + tok + threshold)
    runs["Sc"] = curate_run("Sc", runs_dir / "scratch-c", base + tok + threshold)
    differ["c"] = published_differences(r_dir, runs["Sc"].run_dir)
    r_work = tree_bytes(r_dir / "_work")
    r_total = tree_bytes(r_dir)
    load1 = os.getloadavg()

    # ------------------------------------------------------------------ report
    in_bytes = manifest["bytes"]
    pages = manifest["pages"]
    tpl = manifest["templates"]
    cases = [("a", "S8", f"2 files added ({', '.join(late)}) to the 6 of S6"),
             ("b", "Sb", f"tokenizer swapped (vocabulary {args.vocab} for 8192)"),
             ("c", "Sc", f"gopher_quality.min_words 50 -> {args.min_words} (tokenizer as (b))")]
    mb6 = sum(f["bytes"] for f in manifest["files"] if f["name"] in early) / 1e6
    lines = [
        "# Incremental reruns against from-scratch runs, `curate run` of pipelines/sample.yaml",
        "",
        f"Input: {len(names)} gzipped WARC files, **{in_bytes / 1e6:.1f} MB** on disk, "
        f"**{pages['pages']} pages** ({pages['en']} en, {pages['ja']} ja; {pages['copies']} "
        f"planted exact copies): real page templates from the corpus ({tpl['kept_en']} en, "
        f"{tpl['kept_ja']} ja of {tpl['pages']} pages), each body a distinct draw of 5-15 real "
        f"paragraphs ({manifest['pools']['en']} en, {manifest['pools']['ja']} ja in the pools), "
        f"seed {manifest['seed']}. S6 reads {len(early)} files ({mb6:.1f} MB), leaving out "
        f"{', '.join(late)}. Dask, 2 workers (the pipeline's). CPU: the whole process tree "
        "(RUSAGE_CHILDREN, orphans reaped as subreaper"
        + ("" if reaper else "; **subreaper refused: orphans' CPU missing**") + "). "
        f"{args.warmup} unmeasured warm-up run(s) of the sample first. Load average "
        f"(1, 5, 15 min) at the start {load0[0]:.1f}, {load0[1]:.1f}, {load0[2]:.1f}; at the "
        f"end {load1[0]:.1f}, {load1[1]:.1f}, {load1[2]:.1f}.",
        "",
        "| case | change | rerun wall s | scratch wall s | wall rerun / scratch | "
        "rerun CPU s | scratch CPU s | CPU rerun / scratch | published bytes |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for case, scratch, change in cases:
        r, s = runs[case], runs[scratch]
        same = "**identical**" if not differ[case] else f"**differ** ({len(differ[case])})"
        lines.append(f"| ({case}) | {change} | {r.wall:.1f} | {s.wall:.1f} | "
                     f"**{ratio(r.wall, s.wall)}** | {r.cpu:.1f} | {s.cpu:.1f} | "
                     f"**{ratio(r.cpu, s.cpu)}** | {same} |")
    lines += [
        "",
        "| run | run folder | wall s | CPU s | run s (stats) | documents read | kept (tokenize) "
        "| extract_html s (stats) | store_bytes | store / input |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, run in runs.items():
        docs_in = run.stats["stages"][0]["in"]
        docs_kept = run.stage("tokenize").get("kept", 0)
        size = in_bytes if name != "S6" else mb6 * 1e6
        lines.append(f"| {name} | {run.run_dir.name} | {run.wall:.1f} | {run.cpu:.1f} | "
                     f"{run.stats.get('seconds', 0):.1f} | {docs_in} | {docs_kept} | "
                     f"{run.stage('extract_html').get('seconds', 0):.2f} | "
                     f"{run.store_bytes / 1e6:.1f} MB | {run.store_bytes / size:.3f} |")
    lines += [
        "",
        f"R after (c): `_store/` {runs['c'].store_bytes / 1e6:.1f} MB "
        f"({runs['c'].store_bytes / in_bytes:.3f} of the input), `_work/` {r_work / 1e6:.1f} MB "
        f"({r_work / in_bytes:.3f}), the whole run folder {r_total / 1e6:.1f} MB "
        f"({r_total / in_bytes:.3f}).",
        "",
    ]
    lines += ["Funnel of S8 (all files from scratch; documents):", "",
              "| stage | in | kept | removed | reasons |", "|---|---:|---:|---:|---|"]
    for s in runs["S8"].stats["stages"]:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(
            (s.get("removed_by_reason") or {}).items(), key=lambda kv: -kv[1])[:4])
        lines.append(f"| {s['name']} | {s['in']} | {s['kept']} | {s['removed']} | {reasons} |")
    lines.append("")
    for case, scratch, change in cases:
        r = runs[case]
        lines += [f"## ({case}) {change}", ""]
        if differ[case]:
            lines += [f"Published files against {scratch} (from scratch): **differ**:", "",
                      *[f"* {d}" for d in differ[case][:20]], ""]
        else:
            lines += [f"Published files against {scratch} (from scratch, "
                      "`tests/published.py`): **identical**.", ""]
        lines += ["`curate run` printed:", "", "```text", *r.printed, "```", "",
                  "stats.json `reuse`:", "", *[f"* {s}" for s in reuse_summary(r.stats)], ""]
        if case in extract_before:
            ran = r.stats.get("reuse", {}).get("segment-00", {}).get("stages_ran", {})
            lines += [f"extract_html: ran on {ran.get('extract_html', '?')} shards; its "
                      f"seconds in stats.json {r.stage('extract_html').get('seconds', 0):.3f} "
                      f"(the run before: {extract_before[case]:.3f}: carried over, not "
                      "measured again)."
                      + (f" write_parquet's files kept (inode and mtime): {kept[case]}."
                         if case in kept else ""), ""]
    text = "\n".join(lines)
    print()
    print(text)
    figures = {"mb": in_bytes / 1e6, "files": names, "late": late, "pages": pages,
               "min_words": args.min_words, "vocab": args.vocab, "load": [load0, load1],
               "identical": {c: not d for c, d in differ.items()}, "differ": differ,
               "runs": {n: {"wall_s": round(r.wall, 2), "cpu_s": round(r.cpu, 2),
                            "run_s": r.stats.get("seconds"), "store_bytes": r.store_bytes,
                            "docs_in": r.stats["stages"][0]["in"],
                            "extract_html_s": r.stage("extract_html").get("seconds"),
                            "reuse": r.stats.get("reuse"), "printed": r.printed}
                        for n, r in runs.items()},
               "r_work_bytes": r_work, "r_total_bytes": r_total}
    harness.record(args.out, text, figures=figures)
    if any(differ.values()):  # the run folders stay, for a look
        raise SystemExit(f"published outputs differ from scratch: see above; in {runs_dir}")
    if not args.keep:
        shutil.rmtree(runs_dir)
        shutil.rmtree(input_dir)


if __name__ == "__main__":
    main()
