"""End to end against DataTrove 0.10.1: WARC -> trafilatura -> fastText LID -> Gopher repetition,
Gopher quality, C4, FineWeb filters -> MinHash dedup -> tokenizer, on the same WARC files, same
machine, one run each, both on the same number of cores.

    python benchmarks/bench_e2e.py [--copies 5] [--workers 2]

Input: data/sample/warc/*.warc.gz (the bundled real sample) plus the HTML pages of the Zyte
article-extraction benchmark and trafilatura's evaluation set (../shared/corpus) wrapped into
WARC files (``bench_extract.wrap_pages``), ``--copies`` times over under distinct URLs (so the
copies are exact duplicates for the dedup stage to find).

curator: ``curate run`` of the YAML written by ``curator_yaml`` (Dask, ``--workers`` processes).
DataTrove: ``LocalPipelineExecutor`` (tasks = workers = ``--workers``, fork) running
WarcReader -> Trafilatura -> LanguageFilter (ft176 backend pointed at the same lid.176.ftz) ->
GopherRepetition -> GopherQuality -> C4Quality -> FineWebQuality -> JsonlWriter ->
MinhashDedupSignature, then buckets, cluster, and MinhashDedupFilter -> JsonlWriter ->
DocumentTokenizer (the same tokenizer.json). Each command is measured whole by
``proctree.measure`` (wall seconds, CPU seconds of the process tree). Then the kept sets are
compared document by document, and every disagreement is put in a category named by the stage
that removed the document on each side (curator's rejected/<stage>/ files, datatrove's
exclusion writers).
"""

from __future__ import annotations

import argparse
import compileall
import functools
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import harness
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
LANGUAGES = ["en"]
LANGUAGE_THRESHOLD = 0.65  # datatrove's LanguageFilter default (FineWeb's)
# trafilatura as datatrove's Trafilatura extractor calls it: favor_precision, no comments; its
# own `deduplicate` option is turned off there since extract_html does not use it.
TIMEOUT_S = 60
DT_FILTERS = ["gopher_repetition", "gopher_quality", "c4", "fineweb"]  # datatrove's order


NOTES = [
    "## What is matched, and what differs by design", "",
    "* Extraction: both call `trafilatura.extract` with `favor_precision=True`, comments off, "
    "tables on, fallbacks on; datatrove's own `deduplicate=True` is turned off (extract_html "
    "has no such option), and both run it in a sandbox process with a 60 s timeout per page.",
    "* Reading: curator's read_warc takes 2xx responses whose Content-Type is HTML and decodes "
    "with the HTTP charset; datatrove's WarcReader takes any response whose "
    "WARC-Identified-Payload-Type (else libmagic) says HTML, whatever the status, and decodes "
    "UTF-8, else cchardet's guess. Redirect and error pages therefore reach datatrove's "
    "extractor and not ours (stage `read` in the funnel).",
    "* Language pre-filter (curator only; the product's pipelines/cc.yaml, ja.yaml and "
    "sample.yaml have it): `langid_html` reads each page's main text as resiliparse extracts it "
    "(about 1.5 ms a page against about 20 ms for trafilatura) and removes the pages the same "
    "fastText model puts in another language with a score of at least 0.9, so trafilatura runs "
    "on the rest only. The langid stage after extraction decides as before; a page the "
    "pre-filter removed that datatrove keeps would show in the table of pages kept on one side "
    "only (stage `langid`). The row 'without the language pre-filter' is the same YAML without "
    "that stage.",
    "* Language ID: the same model file (lid.176.ftz, datatrove's ft176 backend pointed at it), "
    "`en` kept above 0.65 (datatrove's and FineWeb's threshold), the whole text read in one "
    "prediction on both sides (`window_chars` set past any page; curator's default reads three "
    "2000-character windows).",
    "* Filters: datatrove's four with their defaults, in FineWeb's order; curator's presets "
    "of the same names, which decide as those do (benchmarks/results_heuristics.md) but split "
    "words with one regex where datatrove uses spaCy, and keep or remove whole documents: "
    "datatrove's C4 filter also drops lines (no terminal punctuation, fewer than 3 words, "
    "`javascript`, policy phrases) from the documents it keeps, so its FineWeb filter, its "
    "MinHash and its tokenizer see shorter texts. The `check` column re-runs both chains on "
    "one extraction of the page to tell the two causes apart.",
    "* MinHash: 5-word shingles, 14 bands of 8, 64-bit hashes on both; datatrove's words split "
    "on whitespace (`bench_fuzzy._split_tokenizer`, cheaper than its spaCy default). In a "
    "cluster curator keeps the lowest id, datatrove the first document it read, so the two may "
    "keep different copies of one page: the overlap by page counts a copy as its page.",
    "* Tokenizer: the demo's tokenizer.json on both, `<|endoftext|>` after each document; "
    "curator writes Megatron .bin/.idx, datatrove its per-task .ds files (its "
    "DocumentTokenizerMerger, which would join them, is not run).",
    "* Start-up is inside both measurements: Dask's cluster and numba's cached kernels for "
    "curator (numba's on-disk caches: warm after a first run), the process pool and spaCy's "
    "model load for datatrove.",
]


# ------------------------------------------------------------------------------ input
def stage_input(root: Path, corpus: Path, copies: int) -> tuple[str, int]:
    """The WARC files under root/warc; (their glob, the number of wrapped benchmark pages)."""
    from bench_extract import load_sets, wrap_pages

    warcs = root / "warc"
    shutil.rmtree(warcs, ignore_errors=True)
    (warcs / "sample").mkdir(parents=True)
    for path in sorted((ROOT / "data" / "sample" / "warc").glob("*.warc.gz")):
        shutil.copy(path, warcs / "sample" / path.name)
    sets = load_sets(corpus)
    pages = sets["zyte"][0] + sets["trafilatura_eval"][0]
    if copies:
        # Common Crawl's payload-type header: without it datatrove's reader asks libmagic,
        # which calls 137 of these 481 pages application/javascript or XML and skips them
        wrap_pages(pages * copies, warcs / "bench", 16, identified_type="text/html")
    return str(warcs / "*" / "*.warc.gz"), len(pages)


def tokenizer_file(root: Path) -> Path:
    """The demo's tokenizer (runs/tokenizer), trained here the same way when absent."""
    shipped = ROOT / "runs" / "tokenizer" / "tokenizer.json"
    if shipped.is_file():
        return shipped
    out = root / "tokenizer"
    if not (out / "tokenizer.json").is_file():
        subprocess.run([sys.executable, "-m", "curator.cli", "tokenizer", "train",
                        *map(str, sorted((ROOT / "data" / "sample").glob("*.jsonl.gz"))),
                        "--vocab-size", "8192", "--output", str(out)], check=True, cwd=ROOT)
    return out / "tokenizer.json"


# ------------------------------------------------------------------------------ curator
EXTRACT = {"trafilatura": "extractor: trafilatura, favor_precision: true",
           "resiliparse": "extractor: resiliparse"}


def curator_yaml(pattern: str, tokenizer: Path, workers: int,
                 extractor: str = "trafilatura", prefilter: bool = True) -> str:
    """The product's configuration: the language pre-filter (langid_html) before extraction;
    ``prefilter=False`` runs the stages one for one as datatrove's pipeline has them."""
    before = (f"  - {{type: langid_html, languages: {json.dumps(LANGUAGES)}}}\n"
              if prefilter else "")
    return f"""name: e2e
executor: {{type: dask, workers: {workers}}}
stages:
  - {{type: read_warc, path: "{pattern}"}}
{before}  - {{type: extract_html, {EXTRACT[extractor]}, timeout_s: {TIMEOUT_S}}}
  # datatrove reads the whole text (newlines made spaces) with one prediction
  - {{type: langid, languages: {json.dumps(LANGUAGES)}, min_score: {LANGUAGE_THRESHOLD},
     window_chars: 100000000, windows: 1}}
  - {{type: heuristic_filter, presets: {json.dumps(DT_FILTERS)}}}
  - {{type: fuzzy_dedup, shingle: word, device: cpu}}   # 5-word shingles, 14 bands x 8
  - {{type: write_parquet}}
  - {{type: tokenize, tokenizer: {tokenizer}}}
"""


# ------------------------------------------------------------------------------ datatrove
def _local_lid(languages: list[str]):
    """datatrove's ft176 LID reading the local lid.176.ftz instead of downloading lid.176.bin."""
    from datatrove.utils.lid import FT176LID

    from curator.stages.langid import bundled_model

    class LocalFT176(FT176LID):
        @property
        def model(self):
            if self._model is None:
                from fasttext.FastText import _FastText

                self._model = _FastText(str(bundled_model()))
            return self._model

    return LocalFT176(languages)


def run_datatrove(pattern: str, out: Path, tokenizer: Path, workers: int) -> None:
    from bench_fuzzy import _patch_datatrove_xxhash, _split_tokenizer
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup import MinhashDedupSignature
    from datatrove.pipeline.dedup.minhash import (
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
    )
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
        LanguageFilter,
    )
    from datatrove.pipeline.readers import JsonlReader, WarcReader
    from datatrove.pipeline.tokens import DocumentTokenizer
    from datatrove.pipeline.writers.jsonl import JsonlWriter
    from datatrove.utils.hashing import HashConfig

    _patch_datatrove_xxhash()
    shutil.rmtree(out, ignore_errors=True)
    folder = str(Path(pattern).parent.parent)
    lid = LanguageFilter(languages=LANGUAGES, language_threshold=LANGUAGE_THRESHOLD,
                         exclusion_writer=JsonlWriter(str(out / "removed" / "langid")))
    lid.model = _local_lid(LANGUAGES)
    cfg = MinhashConfig(hash_config=HashConfig(precision=64), n_grams=5, num_buckets=14,
                        hashes_per_bucket=8)

    def removed(name: str) -> JsonlWriter:
        return JsonlWriter(str(out / "removed" / name))

    common = {"workers": workers, "start_method": "fork"}
    s1 = LocalPipelineExecutor(pipeline=[
        WarcReader(folder, glob_pattern="*/*.warc.gz"),
        Trafilatura(favour_precision=True, timeout=TIMEOUT_S, deduplicate=False),
        lid,
        GopherRepetitionFilter(exclusion_writer=removed("gopher_repetition")),
        GopherQualityFilter(exclusion_writer=removed("gopher_quality")),
        C4QualityFilter(exclusion_writer=removed("c4")),
        FineWebQualityFilter(exclusion_writer=removed("fineweb")),
        JsonlWriter(str(out / "filtered")),
        MinhashDedupSignature(output_folder=str(out / "sigs"), config=cfg,
                              language=_split_tokenizer())],
        tasks=workers, logging_dir=str(out / "logs/1"), **common)
    s2 = LocalPipelineExecutor(pipeline=[
        MinhashDedupBuckets(input_folder=str(out / "sigs"), output_folder=str(out / "buckets"),
                            config=cfg)],
        tasks=cfg.num_buckets, logging_dir=str(out / "logs/2"), depends=s1, **common)
    s3 = LocalPipelineExecutor(pipeline=[
        MinhashDedupCluster(input_folder=str(out / "buckets"), output_folder=str(out / "ids"),
                            config=cfg)],
        tasks=1, logging_dir=str(out / "logs/3"), depends=s2, **common)
    s4 = LocalPipelineExecutor(pipeline=[
        JsonlReader(str(out / "filtered")),
        MinhashDedupFilter(input_folder=str(out / "ids"), exclusion_writer=removed("dedup")),
        JsonlWriter(str(out / "output")),
        DocumentTokenizer(output_folder=str(out / "tokens"), tokenizer_name_or_path=str(tokenizer),
                          eos_token="<|endoftext|>")],
        tasks=workers, logging_dir=str(out / "logs/4"), depends=s3, **common)
    s4.run()


# ------------------------------------------------------------------------------ fates
def _jsonl_ids(folder: Path) -> list[dict]:
    rows = []
    for path in sorted(folder.glob("*.jsonl.gz")):
        with gzip.open(path, "rt") as f:
            rows += [json.loads(line) for line in f]
    return rows


def datatrove_fates(out: Path, read_ids: set[str]) -> dict[str, tuple[str, str]]:
    """id -> (stage, reason) on datatrove's side; 'kept' for the documents it wrote at the end."""
    fates: dict[str, tuple[str, str]] = {}
    for stage in ["langid", *DT_FILTERS, "dedup"]:
        for row in _jsonl_ids(out / "removed" / stage):
            fates[row["id"]] = (stage, str(row.get("metadata", {}).get("filter_reason", stage)))
    for row in _jsonl_ids(out / "output"):
        fates[row["id"]] = ("kept", "kept")
    for doc_id in read_ids - fates.keys():
        fates[doc_id] = ("extract", "no text, error or timeout")
    return fates


def curator_fates(out: Path, all_ids: set[str]) -> dict[str, tuple[str, str]]:
    names = {"extract_html": "extract", "langid": "langid", "langid_html": "langid",
             "fuzzy_dedup": "dedup"}
    fates: dict[str, tuple[str, str]] = {}
    for folder in sorted((out / "rejected").glob("*")):
        for path in folder.glob("*.parquet"):
            table = pq.read_table(path, columns=["id", "reason"])
            for doc_id, reason in zip(table.column("id").to_pylist(),
                                      table.column("reason").to_pylist(), strict=True):
                stage = names.get(folder.name, folder.name)
                if folder.name == "heuristic_filter":
                    stage = reason.split(".")[0]
                fates[doc_id] = (stage, reason)
    for path in (out / "errors").glob("*/*.jsonl"):
        for line in path.read_text().splitlines():
            failure = json.loads(line)
            if failure.get("id"):
                fates[failure["id"]] = (names.get(failure["stage"], failure["stage"]),
                                        f"failed: {failure.get('reason') or failure['error']}")
    for path in (out / "write_parquet").glob("*.parquet"):
        for doc_id in pq.read_table(path, columns=["id"]).column("id").to_pylist():
            fates[doc_id] = ("kept", "kept")
    for doc_id in all_ids - fates.keys():
        fates[doc_id] = ("read", "not read as an HTML response")
    return fates


def input_records(pattern: str) -> tuple[dict[str, str], set[str]]:
    """(WARC-Record-ID -> URL of every response record, the ids datatrove's reader yields)."""
    from datatrove.pipeline.readers.warc import process_record
    from warcio.archiveiterator import ArchiveIterator

    urls, dt_read = {}, set()
    for path in sorted(Path(pattern).parent.parent.glob("*/*.warc.gz")):
        with open(path, "rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type != "response":
                    continue
                doc_id = record.rec_headers.get_header("WARC-Record-ID")
                urls[doc_id] = record.rec_headers.get_header("WARC-Target-URI")
                if process_record(record):
                    dt_read.add(doc_id)
    return urls, dt_read


def canonical(url: str, doc_id: str, n_pages: int) -> str:
    """The page a copy came from (copies differ only by URL), else the record itself."""
    if url and url.startswith("http://bench/"):
        return f"page {int(url.rsplit('/', 1)[1]) % n_pages}"
    return doc_id


def overlap(a: set, b: set) -> str:
    both = len(a & b)
    return (f"Jaccard {both / max(1, len(a | b)):.3f}; {both / max(1, len(a)):.1%} of curator's "
            f"kept found in datatrove's, {both / max(1, len(b)):.1%} of datatrove's in curator's")


# ------------------------------------------------------------------------------ stage times
DT_STEPS = {"Warc": "read", "Trafilatura": "extract", "Language ID": "langid",
            "Gopher Repetition": "heuristics", "Gopher Quality": "heuristics",
            "C4 Quality": "heuristics", "FineWeb Quality": "heuristics", "MinHash": "dedup",
            "Jsonl": "write (datatrove: + re-read)", "TOKENIZER": "tokenize"}
CUR_STAGES = {"read_warc": "read", "langid_html": "langid", "extract_html": "extract",
              "langid": "langid",
              "heuristic_filter": "heuristics", "fuzzy_dedup": "dedup",
              "write_parquet": "write (datatrove: + re-read)", "tokenize": "tokenize"}


def datatrove_times(out: Path) -> tuple[Counter, int]:
    """Seconds per step summed over tasks as datatrove logs them, and the tokens it wrote.
    MinHash stage 1 is timed around its whole loop, upstream steps included: those are taken
    off (its JsonlWriter's too, which runs inside the same loop)."""
    times: Counter = Counter()
    tokens = 0
    for step in ("1", "2", "3", "4"):
        upstream = 0.0
        for entry in json.loads((out / "logs" / step / "stats.json").read_text()):
            total = entry.get("time_stats", {}).get("total", 0.0)
            kind = next((v for k, v in DT_STEPS.items() if k in entry["name"]), "other")
            if "MinHash stage 1" in entry["name"]:
                total = max(0.0, total - upstream)
            upstream += total
            times[kind] += total
            tokens += entry.get("stats", {}).get("tokens", {}).get("total", 0) \
                if isinstance(entry.get("stats", {}).get("tokens"), dict) else 0
    return times, tokens


def curator_times(out: Path) -> tuple[Counter, int]:
    stats = json.loads((out / "stats.json").read_text())
    times: Counter = Counter()
    tokens = 0
    for stage in stats["stages"]:
        times[CUR_STAGES.get(stage["type"], stage["type"])] += stage.get("seconds", 0.0)
        tokens += stage.get("tokens", 0) if stage["type"] == "tokenize" else 0
    return times, tokens


# ------------------------------------------------------------------------------ main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--dir", default="bench-data/e2e")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results_e2e.md"))
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the report from the last run's folders and measurements")
    ap.add_argument("--datatrove-only", nargs=2, metavar=("PATTERN", "TOKENIZER"),
                    help=argparse.SUPPRESS)  # the measured datatrove process
    args = ap.parse_args()
    root = Path(args.dir).resolve()
    if args.datatrove_only:
        run_datatrove(args.datatrove_only[0], root / "datatrove", Path(args.datatrove_only[1]),
                      args.workers)
        return

    from proctree import Measured, measure

    # Both sides as a user installs them: pip byte-compiles datatrove's modules; curator's (an
    # editable checkout here, on a machine that sets PYTHONDONTWRITEBYTECODE) likewise, or every
    # process would compile them again (1.5-2 CPU-s of a 15 s run on 2 cores).
    compileall.compile_dir(str(ROOT / "curator"), quiet=1)
    if args.report_only:
        saved = json.loads((root / "measured.json").read_text())
        pattern, n_pages = saved["pattern"], saved["n_pages"]
        args.copies, args.workers = saved["copies"], saved["workers"]
        cur, dt = Measured(**saved["curator"]), Measured(**saved["datatrove"])
        fast = Measured(**saved["resiliparse"])
        plain = Measured(**saved["no_prefilter"])
        cur_cmd, dt_cmd = saved["cur_cmd"], saved["dt_cmd"]
        urls, dt_read = input_records(pattern)
        compare(args, root, pattern, n_pages, urls, dt_read, cur, dt, fast, plain, cur_cmd,
                dt_cmd)
        return
    pattern, n_pages = stage_input(root, Path(args.corpus), args.copies)
    tokenizer = tokenizer_file(root)
    urls, dt_read = input_records(pattern)
    n_in = len(urls)
    config = root / "curator.yaml"
    config.write_text(curator_yaml(pattern, tokenizer, args.workers))
    cur_cmd = [sys.executable, "-m", "curator", "run", str(config), "--output",
               str(root / "curator")]
    dt_cmd = [sys.executable, __file__, "--dir", str(root), "--workers", str(args.workers),
              "--datatrove-only", pattern, str(tokenizer)]
    shutil.rmtree(root / "curator", ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    print(f"{n_in} response records in {pattern}; running curator", flush=True)
    cur = measure(cur_cmd, env=env)
    if cur.returncode:
        raise SystemExit(f"curate run failed:\n{cur.output[-3000:]}")
    print(f"curator: {cur.seconds:.1f} s wall, {cur.cpu_seconds:.1f} CPU s; running datatrove",
          flush=True)
    dt = measure(dt_cmd, env=env)
    if dt.returncode:
        raise SystemExit(f"datatrove failed:\n{dt.output[-3000:]}")
    print(f"datatrove: {dt.seconds:.1f} s wall, {dt.cpu_seconds:.1f} CPU s", flush=True)
    fast = variant(root, "resiliparse", curator_yaml(pattern, tokenizer, args.workers,
                                                     "resiliparse"), env)
    plain = variant(root, "no-prefilter", curator_yaml(pattern, tokenizer, args.workers,
                                                       prefilter=False), env)
    keep = ("seconds", "cpu_seconds", "peak_rss_mb", "output", "returncode")
    (root / "measured.json").write_text(json.dumps({
        "pattern": pattern, "n_pages": n_pages, "copies": args.copies, "workers": args.workers,
        "cur_cmd": cur_cmd, "dt_cmd": dt_cmd,
        "curator": {k: getattr(cur, k) for k in keep},
        "datatrove": {k: getattr(dt, k) for k in keep},
        "resiliparse": {k: getattr(fast, k) for k in keep},
        "no_prefilter": {k: getattr(plain, k) for k in keep}}))
    compare(args, root, pattern, n_pages, urls, dt_read, cur, dt, fast, plain, cur_cmd, dt_cmd)


def variant(root: Path, name: str, yaml: str, env: dict):
    """One more measured ``curate run`` of ``yaml`` (kept set not compared)."""
    from proctree import measure

    config = root / f"curator-{name}.yaml"
    config.write_text(yaml)
    shutil.rmtree(root / f"curator-{name}", ignore_errors=True)
    done = measure([sys.executable, "-m", "curator", "run", str(config), "--output",
                    str(root / f"curator-{name}")], env=env)
    if done.returncode:
        raise SystemExit(f"curate run ({name}) failed:\n{done.output[-3000:]}")
    print(f"curator, {name}: {done.seconds:.1f} s wall, {done.cpu_seconds:.1f} CPU s")
    return done


def compare(args, root, pattern, n_pages, urls, dt_read, cur, dt, fast, plain, cur_cmd,
            dt_cmd) -> None:
    ours = curator_fates(root / "curator", set(urls))
    theirs = datatrove_fates(root / "datatrove", dt_read)
    for doc_id in set(urls) - theirs.keys():
        theirs[doc_id] = ("read", "not read (payload type / charset)")
    report(args, root, pattern, n_pages, urls, cur, dt, fast, plain, ours, theirs, cur_cmd,
           dt_cmd)


def page_html(pattern: str, corpus: Path) -> dict[str, str]:
    """HTML per page key: the benchmark pages by index, the sample's records by id."""
    from bench_extract import load_sets
    from datatrove.pipeline.readers.warc import process_record
    from warcio.archiveiterator import ArchiveIterator

    sets = load_sets(corpus)
    html = {f"page {i}": page
            for i, page in enumerate(sets["zyte"][0] + sets["trafilatura_eval"][0])}
    for path in sorted(Path(pattern).parent.parent.glob("sample/*.warc.gz")):
        with open(path, "rb") as f:
            for record in ArchiveIterator(f):
                row = process_record(record)
                if row:
                    html[row["id"]] = row["text"]
    return html


@functools.cache
def _filters() -> tuple:
    """curator's heuristic_filter and datatrove's four filters, built once."""
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )

    from curator import HeuristicFilter

    return HeuristicFilter(presets=DT_FILTERS), (GopherRepetitionFilter(), GopherQualityFilter(),
                                                 C4QualityFilter(), FineWebQualityFilter())


def rerun(html: str | None) -> str:
    """Both tools' four filters, each chain as its pipeline runs it, on one extraction of the
    page (trafilatura as both call it): where each removes it, and where curator's filters
    land on the text datatrove's C4 step leaves (it drops lines; curator does not)."""
    if not html:
        return ""
    import pyarrow as pa
    import trafilatura
    from datatrove.data import Document

    text = trafilatura.extract(html, favor_precision=True, include_comments=False,
                               deduplicate=False)
    if not text:
        return "no text when re-extracted"

    def ours(t: str) -> str:
        reason = _filters()[0].reasons(
            pa.table({"text": [t], "lang": ["en"]}))[0].as_py()
        return reason or "keeps"

    doc, theirs = Document(text=text, id="x"), "keeps"
    for flt in _filters()[1]:
        verdict = flt.filter(doc)
        if verdict is not True:
            theirs = verdict[1] if isinstance(verdict, tuple) else flt.name
            break
    return (f"same text: curator {ours(text)}, datatrove {theirs}; curator on datatrove's "
            f"C4-cleaned text: {ours(doc.text)}")


def why(key: tuple) -> str:
    """The cause of one disagreement row, from the stages and the re-run check."""
    stages = {key[0], key[2]}
    if "read" in stages:
        return "which WARC records each reader takes as HTML pages"
    if "extract" in stages:
        return "extraction (charset decoding, timeout)"
    if "langid" in stages:
        return "language ID score at the 0.65 line"
    check = key[4]
    if "C4-cleaned text: keeps" in check and ("fineweb" in stages or "dedup" in stages):
        return "datatrove's C4 filter dropped lines before its FineWeb filter / MinHash ran"
    if check.startswith("same text") and stages & {"gopher_quality", "gopher_repetition", "c4"}:
        return "same text scored either side of a threshold (spaCy vs regex word splitting)"
    return "?"


def speed_reading(t_ours: Counter, t_theirs: Counter, cur, dt) -> list[str]:
    extract_share = t_ours["extract"] / max(1e-9, sum(t_ours.values()))
    rest_ours = sum(t_ours.values()) - t_ours["extract"]
    rest_theirs = sum(t_theirs.values()) - t_theirs["extract"]
    bound = dt.cpu_seconds / max(1e-9, cur.cpu_seconds * extract_share)
    return [
        "", f"Reading it: trafilatura, the same library called the same way on both sides, is "
        f"{extract_share:.0%} of curator's in-stage time ({t_ours['extract']:.1f} s against "
        f"datatrove's {t_theirs['extract']:.1f} s). Were every other part of curator free, the "
        f"ratio per CPU-second could not exceed datatrove's CPU seconds / curator's extraction "
        f"share of its CPU seconds = {bound:.2f}x. The other stages (reading included) take "
        f"{rest_ours:.1f} s in curator against {rest_theirs:.1f} s in datatrove "
        f"({rest_theirs / max(1e-9, rest_ours):.1f}x), the heuristic filters most of that "
        f"({t_theirs['heuristics'] / max(1e-9, t_ours['heuristics']):.1f}x: spaCy "
        "tokenisation and per-document Python against column kernels)."]


def report(args, root, pattern, n_pages, urls, cur, dt, fast, plain, ours, theirs, cur_cmd,
           dt_cmd) -> None:
    n_in = len(urls)
    kept_ours = {i for i, f in ours.items() if f[0] == "kept"}
    kept_theirs = {i for i, f in theirs.items() if f[0] == "kept"}
    canon_ours = {canonical(urls[i], i, n_pages) for i in kept_ours}
    canon_theirs = {canonical(urls[i], i, n_pages) for i in kept_theirs}
    html = page_html(pattern, Path(args.corpus))
    disagreements: Counter = Counter()
    examples: dict[tuple, str] = {}
    by_page: dict[str, list[str]] = {}
    for doc_id, url in urls.items():
        by_page.setdefault(canonical(url, doc_id, n_pages), []).append(doc_id)
    for page, ids in by_page.items():
        a, b = page in canon_ours, page in canon_theirs
        if a == b:
            continue
        side_ours = next((ours[i] for i in ids if ours[i][0] != "dedup"), ours[ids[0]])
        side_theirs = next((theirs[i] for i in ids if theirs[i][0] != "dedup"), theirs[ids[0]])
        key = (side_ours[0], side_ours[1] if not a else "", side_theirs[0],
               side_theirs[1] if not b else "", rerun(html.get(page))
               if {side_ours[0], side_theirs[0]} & set(DT_FILTERS) else "")
        disagreements[key] += 1
        examples.setdefault(key, urls[ids[0]] or page)
    t_ours, tok_ours = curator_times(root / "curator")
    t_theirs, tok_theirs = datatrove_times(root / "datatrove")
    funnel_ours = Counter(f[0] for f in ours.values())
    funnel_theirs = Counter(f[0] for f in theirs.values())
    cores = args.workers
    rate_ours, rate_theirs = n_in / cur.cpu_seconds, n_in / dt.cpu_seconds
    lines = [
        "# End to end: curator vs DataTrove 0.10.1", "",
        f"Command: `python benchmarks/bench_e2e.py --copies {args.copies} --workers "
        f"{args.workers}`; {platform.processor() or platform.machine()}, {os.cpu_count()} cores.",
        "",
        f"Input: {n_in} WARC response records ({os.path.relpath(pattern, ROOT)}): "
        "data/sample/warc/*.warc.gz plus the "
        f"{n_pages} Zyte and trafilatura_eval benchmark pages wrapped {args.copies} times over "
        "under distinct URLs (the copies are exact duplicates).", "",
        f"* curator: `{' '.join(Path(c).name if c.startswith('/') else c for c in cur_cmd)}` "
        f"(the YAML below), Dask, {args.workers} worker processes.",
        f"* datatrove: `{' '.join(Path(c).name if c.startswith('/') else c for c in dt_cmd[:2])}"
        f" --datatrove-only ...` (`run_datatrove`), LocalPipelineExecutor tasks = workers = "
        f"{args.workers}.", "",
        "Each measured whole by `proctree.measure` (wall seconds, CPU seconds of the whole "
        "process tree: start-up, Dask or the multiprocessing pool, model loads included). Both "
        "packages byte-compiled, as pip installs them (curator's checkout by compileall).", "",
        "| | wall s | CPU s | peak RSS MB | input pages/s | pages per CPU-second | "
        "pages/s per core (wall) |",
        "|---|---|---|---|---|---|---|",
        f"| curator | {cur.seconds:.1f} | {cur.cpu_seconds:.1f} | {cur.peak_rss_mb:.0f} | "
        f"{n_in / cur.seconds:.1f} | {rate_ours:.2f} | {n_in / cur.seconds / cores:.2f} |",
        f"| datatrove | {dt.seconds:.1f} | {dt.cpu_seconds:.1f} | {dt.peak_rss_mb:.0f} | "
        f"{n_in / dt.seconds:.1f} | {rate_theirs:.2f} | {n_in / dt.seconds / cores:.2f} |",
        f"| curator without the language pre-filter (stages one for one as datatrove's; kept "
        f"set not compared) | {plain.seconds:.1f} | {plain.cpu_seconds:.1f} | "
        f"{plain.peak_rss_mb:.0f} | {n_in / plain.seconds:.1f} | "
        f"{n_in / plain.cpu_seconds:.2f} | {n_in / plain.seconds / cores:.2f} |",
        f"| curator, `extractor: resiliparse` (not matched: the product's fast extractor; "
        f"kept set not compared) | {fast.seconds:.1f} | {fast.cpu_seconds:.1f} | "
        f"{fast.peak_rss_mb:.0f} | {n_in / fast.seconds:.1f} | {n_in / fast.cpu_seconds:.2f} | "
        f"{n_in / fast.seconds / cores:.2f} |",
        "",
        f"* **curator / datatrove, pages per CPU-second: {rate_ours / rate_theirs:.2f}x**; "
        f"wall-clock on {cores} cores: {dt.seconds / cur.seconds:.2f}x (target >= 2x). "
        f"Without the language pre-filter: {dt.cpu_seconds / plain.cpu_seconds:.2f}x per "
        f"CPU-second, {dt.seconds / plain.seconds:.2f}x wall-clock. With "
        f"resiliparse instead of trafilatura: {dt.cpu_seconds / fast.cpu_seconds:.2f}x per "
        f"CPU-second, {dt.seconds / fast.seconds:.2f}x wall-clock.", "",
        "## Wall seconds inside each stage, summed over tasks, as each tool logs them", "",
        "| stage | curator | datatrove | datatrove / curator |", "|---|---|---|---|",
        *[f"| {k} | {t_ours[k]:.1f} | {t_theirs[k]:.1f} | "
          f"{t_theirs[k] / t_ours[k] if t_ours[k] else float('nan'):.1f}x |"
          for k in ["read", "extract", "langid", "heuristics", "dedup",
                    "write (datatrove: + re-read)", "tokenize"]],
        "",
        f"Tokens written: curator {tok_ours}, datatrove {tok_theirs} (datatrove's C4 filter "
        "drops lines from the text it keeps; curator's filters keep or remove whole "
        "documents).", "",
        *speed_reading(t_ours, t_theirs, cur, dt), "",
        "## Funnel (documents whose last stage was ...)", "",
        "| stage | curator | datatrove |", "|---|---|---|",
        *[f"| {s} | {funnel_ours.get(s, 0)} | {funnel_theirs.get(s, 0)} |"
          for s in ["read", "extract", "langid", *DT_FILTERS, "dedup", "kept"]],
        "",
        "## Kept sets", "",
        f"* by WARC-Record-ID: {len(kept_ours)} kept by curator, {len(kept_theirs)} by "
        f"datatrove; {overlap(kept_ours, kept_theirs)}.",
        f"* by page (a copy's record counted as its page: the two sides may keep different "
        f"copies of one duplicate cluster): {len(canon_ours)} / {len(canon_theirs)}; "
        f"**{overlap(canon_ours, canon_theirs)}** (target >= 95 %).", "",
        "## Pages kept on one side only, by where the other side removed them", "",
        "| curator stage | curator reason | datatrove stage | datatrove reason | check | cause "
        "| pages | e.g. |", "|---|---|---|---|---|---|---|---|",
        *[f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | {why(k)} | {n} | {examples[k]} |"
          for k, n in disagreements.most_common()],
        "", *NOTES, "", "## The curator YAML", "", "```yaml",
        (root / "curator.yaml").read_text().rstrip(),
        "```", ""]
    harness.record(args.out, "\n".join(lines))
    print("\n".join(lines))
    print(f"appended to {args.out}")


if __name__ == "__main__":
    main()
