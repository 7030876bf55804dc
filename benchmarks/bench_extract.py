"""HTML extraction and WARC reading, side by side with the libraries called directly.

(a) Quality: every extractor of ``extract_html`` (its ``process``, in this process) on the Zyte
article-extraction benchmark (upstream metric: 4-token shingles of ``\\w+`` tokens, per-page
counts normalised to sum 1, P/R over the sums, F1 of those) and on trafilatura's evaluation
subset (``with``/``without`` snippets as TP/FN/FP/TN), with ``trafilatura.extract`` called
directly with the same settings as the reference.
(b) Speed, one core: pages/s of each extractor on the HTML responses of the corpus WARCs plus
the benchmark pages wrapped into WARC files; the WARC reader (``read_warc_batches``) against
FastWARC iterating the same files; and the segment ``curate run`` read_warc -> extract_html ->
write_parquet with 1 and 2 worker processes.

    python benchmarks/bench_extract.py [--corpus ../shared/corpus] [--repeat 2]
    python benchmarks/bench_extract.py --only reader   # the WARC-reading table alone, printed

The reader table is measured in a subprocess of its own (``--only reader --pattern``), as a
worker process reads, not in this process's heap of pages and extractor caches.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import harness
import pyarrow as pa
import trafilatura
from fastwarc.warc import ArchiveIterator, WarcRecordType
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from curator.batch import Shard
from curator.io.files import list_shards
from curator.io.warc import read_warc_batches
from curator.stages.extract.html import ExtractHtml

ROOT = Path(__file__).resolve().parents[1]
WORD = re.compile(r"\w+")
CONFIGS = {  # name -> ExtractHtml parameters
    "trafilatura": {"extractor": "trafilatura"},
    "trafilatura favor_precision": {"extractor": "trafilatura", "favor_precision": True},
    "resiliparse": {"extractor": "resiliparse"},
    "justext": {"extractor": "justext"},
    "[justext, resiliparse]": {"extractor": ["justext", "resiliparse"]},
}
DIRECT = {"favor_precision": False, "favor_recall": False, "include_tables": True,
          "include_comments": False, "no_fallback": False}  # ExtractHtml's defaults


# ------------------------------------------------------------------------------ quality
def shingles(text: str, n: int = 4) -> Counter:
    tokens = WORD.findall(text or "")
    return Counter(tuple(tokens[i:i + n]) for i in range(max(1, len(tokens) - n + 1)))


def shingle_counts(truth: str, predicted: str) -> tuple[float, float, float]:
    """Upstream's per-page (tp, fp, fn), normalised to sum 1."""
    want, got = shingles(truth), shingles(predicted)
    tp = sum((want & got).values())
    fp, fn = sum(got.values()) - tp, sum(want.values()) - tp
    total = tp + fp + fn
    return (tp / total, fp / total, fn / total) if total else (1.0, 0.0, 0.0)


def prf(tp: float, fp: float, fn: float) -> tuple[float, float, float]:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def zyte_score(truth: dict[str, str], predicted: dict[str, str]) -> tuple[float, float, float]:
    sums = [0.0, 0.0, 0.0]
    for key, text in truth.items():
        for i, v in enumerate(shingle_counts(text, predicted.get(key) or "")):
            sums[i] += v
    return prf(*sums)


def snippet_score(cases: list[dict], predicted: list[str]) -> tuple[float, float, float]:
    tp = fp = fn = 0
    for case, text in zip(cases, predicted, strict=True):
        text = text or ""
        tp += sum(s in text for s in case["with"])
        fn += sum(s not in text for s in case["with"])
        fp += sum(s in text for s in case["without"])
    return prf(tp, fp, fn)


def load_sets(corpus: Path) -> dict[str, tuple[list[str], object]]:
    zyte = corpus / "article_extraction_benchmark"
    truth = json.loads((zyte / "ground-truth.json").read_text())
    keys = sorted(truth)
    zyte_pages = [gzip.decompress((zyte / "html" / f"{k}.html.gz").read_bytes())
                  .decode("utf-8", "replace") for k in keys]
    traf = corpus / "trafilatura_eval"
    evaldata = json.loads((traf / "evaldata.json").read_text())
    cases = [evaldata[url] for url in sorted(evaldata)]
    traf_pages = [gzip.decompress((traf / "html" / f"{c['file']}.gz").read_bytes())
                  .decode("utf-8", "replace") for c in cases]
    return {"zyte": (zyte_pages, (keys, {k: truth[k]["articleBody"] for k in keys})),
            "trafilatura_eval": (traf_pages, cases)}


def extract_with_stage(pages: list[str], params: dict) -> list[str]:
    """Each page's text through ExtractHtml.process ("" where the stage removed it)."""
    stage = ExtractHtml(max_document_bytes=None, **params)
    stage.setup()
    ids = [str(i) for i in range(len(pages))]
    result = stage.process(pa.table({"id": ids, "text": pages}))
    out = dict(zip(result.kept.column("id").to_pylist(), result.kept.column("text").to_pylist(),
                   strict=True))
    return [out.get(i, "") for i in ids]


def score(name: str, pages: list[str], ref, texts: list[str]) -> tuple[float, float, float]:
    if name == "zyte":
        keys, truth = ref
        return zyte_score(truth, dict(zip(keys, texts, strict=True)))
    return snippet_score(ref, texts)


def quality(corpus: Path, lines: list[str]) -> None:
    sets = load_sets(corpus)
    zyte_ref = json.loads(gzip.decompress((corpus / "article_extraction_benchmark" /
                                           "reference_outputs" / "trafilatura.json.gz")
                                          .read_bytes()))["output"]
    keys, truth = sets["zyte"][1]
    p, r, f = zyte_score(truth, {k: zyte_ref.get(k, {}).get("articleBody", "") for k in keys})
    lines += ["## (a) Quality", "",
              f"Metric check: upstream's own trafilatura 2.0.0 output scores P {p:.3f} R {r:.3f} "
              f"F1 {f:.3f} with this metric (published: P 0.938 R 0.978 F1 0.958).", "",
              "| extractor | Zyte P | Zyte R | Zyte F1 | trafilatura_eval P | R | F1 |",
              "|---|---|---|---|---|---|---|"]
    results = {}
    for label, params in CONFIGS.items():
        row = [label]
        for set_name, (pages, ref) in sets.items():
            started = time.perf_counter()
            texts = extract_with_stage(pages, params)
            results[(label, set_name)] = score(set_name, pages, ref, texts)
            row += [f"{v:.3f}" for v in results[(label, set_name)]]
            print(f"{label} {set_name}: {results[(label, set_name)]} "
                  f"({time.perf_counter() - started:.1f} s)", flush=True)
        lines.append("| curator " + " | ".join(row) + " |")
    for label, options in (("trafilatura", DIRECT),
                           ("trafilatura favor_precision", {**DIRECT, "favor_precision": True})):
        row = [label]
        for set_name, (pages, ref) in sets.items():
            texts = [trafilatura.extract(page, **options) or "" for page in pages]
            results[("direct " + label, set_name)] = score(set_name, pages, ref, texts)
            row += [f"{v:.3f}" for v in results[("direct " + label, set_name)]]
        lines.append("| direct " + " | ".join(row) + " |")
    lines.append("")
    for label in ("trafilatura", "trafilatura favor_precision"):
        for set_name in sets:
            gap = results[(label, set_name)][2] - results[("direct " + label, set_name)][2]
            verdict = "within 0.005" if abs(gap) <= 0.005 else "OUTSIDE 0.005"
            lines.append(f"* {label}, {set_name}: curator F1 - direct F1 = {gap:+.4f} ({verdict})")
    lines.append("")


# ------------------------------------------------------------------------------ speed
SEGMENT_COPIES = 3
#: Rounds of the reader table per --repeat: each loop reads the files in about 0.15 s, so the
#: best of few rounds still carries the machine's noise (0.89-0.95 over session 8's runs).
READER_ROUNDS = 10


def wrap_pages(pages: list[str], folder: Path, n_files: int,
               identified_type: str | None = None) -> None:
    """The pages as HTML responses in ``n_files`` gzip WARC files; ``identified_type`` adds a
    ``WARC-Identified-Payload-Type`` header, as Common Crawl writes (datatrove reads it). Record
    ids and dates derive from the page's place, so the same pages give the same files in every
    call (tables made over several calls compare output digests)."""
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(n_files):
        with open(folder / f"bench-{f:02d}.warc.gz", "wb") as out:
            writer = WARCWriter(out, gzip=True)
            for i in range(f, len(pages), n_files):
                payload = pages[i].encode("utf-8")
                http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                                   ("Content-Length", str(len(payload)))],
                                        protocol="HTTP/1.1")
                url = f"http://bench/{i}"
                extra = {"WARC-Record-ID": f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, url)}>",
                         "WARC-Date": "2024-01-01T00:00:00Z"}
                if identified_type:
                    extra["WARC-Identified-Payload-Type"] = identified_type
                writer.write_record(writer.create_warc_record(
                    url, "response", payload=io.BytesIO(payload),
                    http_headers=http, warc_headers_dict=extra))


def read_pages(pattern: str) -> list[str]:
    return [text for shard in list_shards(pattern)
            for batch in read_warc_batches(shard, 8 << 20, "read_warc")
            if batch.table.num_rows for text in batch.table.column("text").to_pylist()]


def direct_extractor(name: str):
    """The library called directly, with the settings ExtractHtml uses by default."""
    if name == "trafilatura":
        return lambda page: trafilatura.extract(page, **DIRECT)
    if name == "resiliparse":
        from resiliparse.extract.html2text import extract_plain_text

        return lambda page: extract_plain_text(page, main_content=True, alt_texts=False,
                                               comments=False)
    import justext

    stoplist = justext.get_stoplist("English")
    return lambda page: "\n".join(p.text for p in justext.justext(page, stoplist)
                                  if not p.is_boilerplate)


def best_of(repeat: int, work) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


def fastwarc_iterate(paths: list[str], decode: bool = False) -> int:
    """FastWARC alone: every HTML response's payload bytes; with ``decode``, also the least a
    user needs for text: the payload decoded to ``str`` with the header's charset (UTF-8 when it
    names none or an unknown one), bad bytes replaced."""
    n = 0
    for path in paths:
        try:
            for rec in ArchiveIterator(path, record_types=WarcRecordType.response,
                                       parse_http=True, auto_decode="all"):
                if (rec.http_content_type or "") in ("text/html", "application/xhtml+xml"):
                    payload = rec.reader.read()
                    if decode:
                        try:
                            payload.decode(rec.http_charset or "utf-8", "replace")
                        except LookupError:
                            payload.decode("utf-8", "replace")
                    n += 1
        except OSError:  # an ARC file, a damaged record: FastWARC stops reading the file there
            continue
    return n


def curator_read(paths: list[str]) -> int:
    return sum(b.table.num_rows for p in paths
               for b in read_warc_batches(Shard(0, p, label=p), 8 << 20, "read_warc"))


def segment_run(work: Path, pattern: str, workers: int) -> float:
    config = work / f"segment-{workers}.yaml"
    config.write_text(f"""
name: extract-bench
batch_bytes: 1048576
executor: {{type: dask, workers: {workers}, processes: true}}
stages:
  - {{type: read_warc, path: "{pattern}"}}
  - {{type: extract_html}}
  - {{type: write_parquet}}
""")
    out = work / f"segment-{workers}-run"
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "curator", "run", str(config), "--output", str(out)],
                   cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - started


def stage_warcs(corpus: Path, work: Path, sets: dict) -> str:
    """The corpus WARCs and the benchmark pages wrapped into 8 WARC files under ``work``; their
    glob pattern."""
    warcs = work / "warcs"
    for path in sorted((corpus / "warc").glob("*/*")):
        target = warcs / path.parent.name / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    wrap_pages(sets["zyte"][0] + sets["trafilatura_eval"][0], warcs / "bench", 8)
    return f"{warcs}/*/*"


def speed(corpus: Path, work: Path, repeat: int, lines: list[str]) -> None:
    sets = load_sets(corpus)
    pattern = stage_warcs(corpus, work, sets)
    pages = read_pages(pattern)
    mb = sum(len(p.encode()) for p in pages) / 1e6
    lines += ["## (b) Speed (one core unless said)", "",
              f"Pages: {len(pages)} HTML responses read by read_warc from {pattern} (the 20 "
              f"corpus WARCs and the {len(sets['zyte'][0]) + len(sets['trafilatura_eval'][0])} "
              f"benchmark pages wrapped into 8 WARC files), {mb:.1f} MB of HTML. Best of "
              f"{repeat} runs each, curator and direct interleaved.", "",
              "| extractor | curator pages/s | direct pages/s | curator / direct |",
              "|---|---|---|---|"]
    table = pa.table({"id": [str(i) for i in range(len(pages))], "text": pages})
    rates = {}
    for name in ("trafilatura", "resiliparse", "justext"):
        stage = ExtractHtml(extractor=name, max_document_bytes=None)
        stage.setup()
        direct = direct_extractor(name)
        ours = theirs = float("inf")
        for _ in range(repeat):
            ours = min(ours, best_of(1, lambda s=stage: s.process(table)))
            theirs = min(theirs, best_of(1, lambda d=direct: [d(p) for p in pages]))
        rates[name] = len(pages) / ours
        lines.append(f"| {name} | {rates[name]:.1f} | {len(pages) / theirs:.1f} | "
                     f"{theirs / ours:.3f} |")
        print(lines[-1], flush=True)
    lines += ["", f"* resiliparse / trafilatura (curator): "
              f"{rates['resiliparse'] / rates['trafilatura']:.1f}x (target >= 10x)", ""]

    lines += reader_speed_apart(pattern, repeat)
    segment_speed(sets, work, repeat, lines)


def reader_speed_apart(pattern: str, repeat: int) -> list[str]:
    """The reader table measured in a process of its own, as a worker reads: this one holds
    every page, the extractors' tables and caches by now (read here, the reader measured
    0.887-0.899 of the decoding loop; in a process of its own 0.903-0.946)."""
    done = subprocess.run([sys.executable, __file__, "--only", "reader", "--pattern", pattern,
                           "--repeat", str(repeat)], check=True, capture_output=True, text=True)
    lines = done.stdout.splitlines()
    print("\n".join(lines), flush=True)
    return [*lines, ""]


def reader_speed(pattern: str, repeat: int) -> None:
    """read_warc_batches against FastWARC's loops over the same files: rounds of the three in
    turn (load on a shared machine hits all alike), best wall and best CPU seconds of each,
    printed as a table."""
    paths = [s.path for s in list_shards(pattern)]
    loops = {"bytes": lambda: fastwarc_iterate(paths),
             "decode": lambda: fastwarc_iterate(paths, decode=True),
             "curator": lambda: curator_read(paths)}
    wall = dict.fromkeys(loops, float("inf"))
    cpu = dict.fromkeys(loops, float("inf"))
    for _ in range(READER_ROUNDS * repeat):
        for name, work in loops.items():
            started, used = time.perf_counter(), time.process_time()
            work()
            wall[name] = min(wall[name], time.perf_counter() - started)
            cpu[name] = min(cpu[name], time.process_time() - used)
    n_fast, n_ours = fastwarc_iterate(paths), curator_read(paths)

    def ratio(clock: dict) -> str:
        return (f"{clock['bytes'] / clock['curator']:.3f} of the bytes loop, "
                f"{clock['decode'] / clock['curator']:.3f} of the decoding loop")

    lines = ["WARC reading, same files: FastWARC iterating the HTML responses and reading their "
              "payloads (no charset decoding; it stops at the first unparsable record of a file, "
              "and counts redirects and error pages) against read_warc_batches (2xx HTML "
              "payloads read, length-checked, charset-decoded into an Arrow table; ARC through "
              f"warcio; resumes after damage). Best of {READER_ROUNDS * repeat} rounds, the three "
              "loops in turn, in a process of their own; CPU seconds are that process's (less "
              "sensitive to other jobs).", "",
              "| reader | wall s | CPU s | HTML responses |", "|---|---|---|---|",
              f"| FastWARC, payload bytes | {wall['bytes']:.3f} | {cpu['bytes']:.3f} | "
              f"{n_fast} |",
              f"| FastWARC, payload decoded to str (header charset, else UTF-8) | "
              f"{wall['decode']:.3f} | {cpu['decode']:.3f} | {n_fast} |",
              f"| curator read_warc | {wall['curator']:.3f} | {cpu['curator']:.3f} | {n_ours} |",
              "", f"* curator / FastWARC throughput, wall: {ratio(wall)}; CPU: {ratio(cpu)} "
              "(target >= 0.9)", ""]
    print("\n".join(lines), flush=True)


def segment_speed(sets: dict, work: Path, repeat: int, lines: list[str]) -> None:
    """The segment read_warc -> extract_html -> write_parquet through ``curate run``."""
    bench_pages = sets["zyte"][0] + sets["trafilatura_eval"][0]
    wrap_pages(bench_pages * SEGMENT_COPIES, work / "segment", 16)
    pattern = f"{work}/segment/*"
    n_segment = len(bench_pages) * SEGMENT_COPIES
    one = two = float("inf")
    for _ in range(repeat + 1):  # interleaved: a busy spell on the machine hits both alike
        one = min(one, segment_run(work, pattern, 1))
        two = min(two, segment_run(work, pattern, 2))
    lines += ["Segment through the product path: `curate run` read_warc -> extract_html "
              "(trafilatura) -> write_parquet, `executor: {type: dask, processes: true}` (the "
              f"benchmark pages wrapped {SEGMENT_COPIES} times over into 16 files, "
              f"{n_segment} pages), wall time including start-up; best of {repeat + 1} runs "
              "each, 1 and 2 workers in turn.", "",
              "| workers | seconds | pages/s | speed-up |", "|---|---|---|---|",
              f"| 1 | {one:.1f} | {n_segment / one:.1f} | 1.00 |",
              f"| 2 | {two:.1f} | {n_segment / two:.1f} | {one / two:.2f} (target >= 1.8) |", ""]
    print("\n".join(lines[-4:]), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus"))
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results_extract.md"))
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--only", choices=["reader"],
                        help="reader: only the WARC-reading table, printed (with the commit, "
                             "machine and command), results file untouched")
    parser.add_argument("--pattern", help="with --only reader: these WARC files (a glob)")
    args = parser.parse_args()
    corpus = Path(args.corpus)
    if args.only == "reader":
        if args.pattern:
            reader_speed(args.pattern, args.repeat)
            return
        with tempfile.TemporaryDirectory() as tmp, \
                harness.Recording(None, title="bench_extract.py --only reader"):
            reader_speed(stage_warcs(corpus, Path(tmp), load_sets(corpus)), args.repeat)
        return
    lines = ["# HTML extraction and WARC reading", "",
             f"Command: `python benchmarks/bench_extract.py --repeat {args.repeat}`; "
             f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared with "
             f"other jobs while measured: timings are noisy); trafilatura "
             f"{trafilatura.__version__}.", ""]
    if not args.skip_quality:
        quality(corpus, lines)
    with tempfile.TemporaryDirectory() as tmp:
        speed(corpus, Path(tmp), args.repeat, lines)
    harness.record(args.out, "\n".join(lines))
    print(f"appended to {args.out}")


if __name__ == "__main__":
    main()
