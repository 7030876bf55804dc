"""line_dedup through `curate run` against datatrove's SentenceDedup on the same web pages.

    python benchmarks/bench_line_dedup.py --mb 500 --part-mb 30 --unit sentence_span
    python benchmarks/bench_line_dedup.py --mb 500 --part-mb 30 --unit line
    python benchmarks/bench_line_dedup.py --mb 20 --unit sentence_span --splitter spacy --japanese 0

Pages: line_docs.py (real sentences, site boilerplate). Settings matched on both sides: a unit
in two or more places is removed from every place but the first in input order (datatrove: one
task over every file, so its document index is the input order); ``line``: datatrove's
``split_sentences=False``, ``n_sentences=1`` (both split at line breaks); ``sentence_span``:
three-sentence windows, datatrove splitting with curator's rules (``--splitter curator``: the
same sentences on both sides) or with its own spaCy sentencizer (``--splitter spacy``: English
pages of only the pool's sentences both splitters take alike, so that the windows match);
units compared lower-cased with whitespace collapsed (datatrove's number, punctuation and
diacritic folding off, as curator has none); no minimum length but "not empty" (curator
``min_chars: 1``; datatrove ``min_doc_words: 0, min_num_sentences: 0``). Each side runs as one
command, measured whole (wall, CPU seconds and peak RSS of its process tree: proctree.py):
curator read_parquet → line_dedup → write_parquet on the default Dask workers, datatrove its
three steps (signatures, find, filter+write) in one process.

Agreement: per document, whitespace collapsed, the characters each side removed; where the two
outputs differ, the words outside their common blocks (difflib over words; a word's characters
and one space) count as removed by one side only. Agreement = characters removed by both /
characters removed by either.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness
import line_docs
import proctree
from bench_dedup_product import SHARED

ROOT = Path(__file__).resolve().parents[1]


def _curator_splitter():
    """datatrove's tokenizer interface splitting sentences as curator does (line_units.pieces),
    so that both sides see the same sentences."""
    from datatrove.utils.word_tokenizers import WordTokenizer

    from curator.stages.dedup import line_units

    class CuratorSentences(WordTokenizer):
        def word_tokenize(self, text: str) -> list[str]:
            return text.split()

        def span_tokenize(self, text: str) -> list[tuple[int, int]]:
            return line_units.pieces(text, "sentence_span", line_units.is_japanese(text, None))

        def sent_tokenize(self, text: str) -> list[str]:
            return [text[s:e] for s, e in self.span_tokenize(text)]

    return CuratorSentences()


def datatrove_main(src: Path, out: Path, unit: str, splitter: str) -> None:
    """The datatrove side (run in its own process by ``--side datatrove``)."""
    from bench_fuzzy import _patch_datatrove_xxhash
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.sentence_dedup import (
        SentDedupConfig,
        SentenceDedupFilter,
        SentenceDedupSignature,
        SentenceFindDedups,
    )
    from datatrove.pipeline.readers import ParquetReader
    from datatrove.pipeline.writers import ParquetWriter
    from datatrove.utils.text import TextNormConfig

    _patch_datatrove_xxhash()
    config = SentDedupConfig(
        n_sentences=1 if unit == "line" else 3, split_sentences=unit != "line",
        min_doc_words=0, min_num_sentences=0,
        norm_config=TextNormConfig(remove_punctuation=False, norm_unicode_diacritics=False,
                                   norm_numbers=False))

    def reader() -> ParquetReader:
        return ParquetReader(str(src), glob_pattern="part-*.parquet", text_key="text",
                             id_key="id")

    language = _curator_splitter() if splitter == "curator" else "en"
    steps = [[reader(), SentenceDedupSignature(output_folder=str(out / "sigs"), config=config,
                                               language=language)],
             [SentenceFindDedups(data_folder=str(out / "sigs"), output_folder=str(out / "dups"),
                                 config=config)],
             [reader(), SentenceDedupFilter(data_folder=str(out / "dups"), config=config,
                                            language=language),
              ParquetWriter(str(out / "output"))]]
    for n, pipeline in enumerate(steps):
        LocalPipelineExecutor(pipeline=pipeline, tasks=1, workers=1,
                              logging_dir=str(out / f"logs/{n}")).run()


PROBE = "This sentence follows it."


def spacy_agreeing_pool(corpus: Path, sample: int, seed: int) -> dict[str, list[str]]:
    """English sentences of the pool that datatrove's spaCy sentencizer and curator's rules both
    take as one sentence ending where it ends (each checked with a sentence after it), of a
    random ``sample``: sentences where the two splitters differ (abbreviations, fragments
    without a full stop, line-broken verse) are left out, so that both sides dedup the same
    three-sentence windows."""
    import random

    from bench_dedup_product import build_pool
    from datatrove.utils.word_tokenizers import load_word_tokenizer

    from curator.stages.dedup import line_units

    spacy = load_word_tokenizer("en")
    english = random.Random(seed).sample(build_pool(corpus)["en"], sample)
    agreeing = []
    for sentence in english:
        text = f"{sentence} {PROBE}"
        ours = [text[a:b] for a, b in line_units.pieces(text, "sentence_span")]
        if ours == [sentence, PROBE] and spacy.sent_tokenize(text) == ours:
            agreeing.append(sentence)
    return {"en": agreeing, "ja": []}


def curator_config(src: Path, out: Path, unit: str) -> Path:
    config = out.parent / f"{out.name}.yaml"
    config.write_text(textwrap.dedent(f"""\
        name: bench-line-dedup
        output: {out}
        stages:
          - {{type: read_parquet, path: "{src}/part-*.parquet"}}
          - {{type: line_dedup, unit: {unit}, min_chars: 1}}
          - {{type: write_parquet}}
        """), encoding="utf-8")
    return config


def _texts(folder: Path) -> dict[str, str]:
    table = pq.read_table(folder, columns=["id", "text"])
    return dict(zip(table.column("id").to_pylist(), table.column("text").to_pylist(),
                    strict=True))


def agreement(src: Path, curator_out: Path, datatrove_out: Path) -> dict:
    """Characters removed by both sides, by one only, per side; documents changed, dropped."""
    original = _texts(src)
    ours, theirs = _texts(curator_out), _texts(datatrove_out)
    both = only_ours = only_theirs = 0
    changed = {"curator": 0, "datatrove": 0}
    dropped = {"curator": len(original) - len(ours), "datatrove": len(original) - len(theirs)}
    differing = []
    for key, text in original.items():
        o = " ".join(text.split())
        c = " ".join((ours.get(key) or "").split())
        d = " ".join((theirs.get(key) or "").split())
        changed["curator"] += c != o
        changed["datatrove"] += d != o
        if c == d:
            both += len(o) - len(c)
            continue
        ct, dt = c.split(" "), d.split(" ")
        blocks = difflib.SequenceMatcher(None, ct, dt, autojunk=False).get_matching_blocks()
        common = sum(len(w) + 1 for b in blocks for w in ct[b.a:b.a + b.size])
        extra_c = len(c) + 1 - common  # characters kept by curator alone (words and a space)
        extra_d = len(d) + 1 - common
        only_theirs += extra_c  # datatrove removed what curator kept
        only_ours += extra_d
        both += len(o) + 1 - common - extra_c - extra_d
        if len(differing) < 5:
            matcher = difflib.SequenceMatcher(None, ct, dt, autojunk=False)
            differing.append({"id": key, "differences": [
                (op, " ".join(ct[i1:i2])[:200], " ".join(dt[j1:j2])[:200])
                for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"][:4]})
    either = both + only_ours + only_theirs
    return {"chars_removed_both": both, "only_curator": only_ours, "only_datatrove": only_theirs,
            "agreement": both / either if either else 1.0, "documents_changed": changed,
            "documents_dropped": dropped, "documents": len(original), "examples": differing}


def measure(cmd: list[str]) -> dict:
    got = proctree.measure(cmd)
    if got.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({got.returncode}):\n{got.output[-3000:]}")
    return {"seconds": got.seconds, "cpu_seconds": got.cpu_seconds,
            "peak_tree_mb": got.peak_rss_mb, "peak_process_mb": got.peak_process_mb}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100.0, help="MB of text")
    ap.add_argument("--part-mb", type=float, default=25.0)
    ap.add_argument("--unit", choices=["line", "sentence_span"], default="line")
    ap.add_argument("--japanese", type=float, default=line_docs.JAPANESE,
                    help="share of Japanese sites (datatrove splits sentences as English)")
    ap.add_argument("--corpus", type=Path, default=SHARED)
    ap.add_argument("--work", type=Path, default=ROOT / "bench-data" / "line-dedup")
    ap.add_argument("--splitter", choices=["spacy", "curator"], default="curator",
                    help="datatrove's sentence splitter (sentence_span): its own (spaCy) or "
                         "curator's rules, so that both sides see the same sentences")
    ap.add_argument("--pool-sample", type=int, default=60_000,
                    help="with --splitter spacy: sentences of the pool checked with both splitters")
    ap.add_argument("--side", choices=["datatrove"], help=argparse.SUPPRESS)
    ap.add_argument("--src", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    harness.add_results_argument(ap, ROOT / "benchmarks" / "results_line_dedup.md")
    args = ap.parse_args()
    if args.side == "datatrove":
        datatrove_main(args.src, args.out, args.unit, args.splitter)
        return
    line_docs.JAPANESE = args.japanese
    pool = None
    if args.unit == "sentence_span" and args.splitter == "spacy":
        if args.japanese:
            raise SystemExit("--splitter spacy splits English only: pass --japanese 0")
        pool = spacy_agreeing_pool(args.corpus, args.pool_sample, 1)
        print(f"{len(pool['en']):,} of {args.pool_sample:,} sentences split alike", flush=True)
    src = args.work / f"corpus-{args.mb:g}mb-ja{args.japanese:g}-{args.unit}-{args.splitter}"
    made = line_docs.make_corpus(src, args.mb / 1e3, args.part_mb, 1, args.corpus,
                                 os.cpu_count() or 1, pool)
    if pool:
        made["pool"] = f"{len(pool['en']):,} of {args.pool_sample:,} sentences split alike"
    print(f"corpus: {made}", flush=True)
    ours, theirs = args.work / f"curator-{args.unit}", args.work / f"datatrove-{args.unit}"
    for folder in (ours, theirs):
        shutil.rmtree(folder, ignore_errors=True)
    theirs.mkdir(parents=True)
    runs = {"curator": measure([sys.executable, "-m", "curator", "run",
                                str(curator_config(src, ours, args.unit))]),
            "datatrove": measure([sys.executable, __file__, "--side", "datatrove",
                                  "--unit", args.unit, "--splitter", args.splitter,
                                  "--src", str(src), "--out", str(theirs)])}
    print(json.dumps(runs), flush=True)
    agree = agreement(src, ours / "write_parquet", theirs / "output")
    mb = made["bytes"] / 1e6
    rate = {side: mb / r["cpu_seconds"] for side, r in runs.items()}
    splitter = (f"; datatrove splitting sentences with {args.splitter}'s rules"
                if args.unit == "sentence_span" else "")
    lines = [f"# line_dedup ({args.unit}) against datatrove's SentenceDedup", "",
             f"{made['docs']:,} pages, {mb:.1f} MB of text in {made['parts']} Parquet parts "
             f"({made['sites']:,} sites, Japanese share of sites {args.japanese:g}); "
             f"{os.cpu_count()} cores{splitter}.", "",
             "| side | wall s | CPU s | MB of text per CPU-s | peak RSS, tree MiB | "
             "largest process MiB |", "|---|---:|---:|---:|---:|---:|"]
    for side, r in runs.items():
        lines.append(f"| {side} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | "
                     f"{rate[side]:.2f} | {r['peak_tree_mb']:.0f} | {r['peak_process_mb']:.0f} |")
    lines += ["", f"curator per CPU-second: **{rate['curator'] / rate['datatrove']:.2f}x** "
              f"datatrove's.", "",
              f"Removed characters: both {agree['chars_removed_both']:,}, curator only "
              f"{agree['only_curator']:,}, datatrove only {agree['only_datatrove']:,}: "
              f"**agreement {agree['agreement']:.4%}**. Documents changed: curator "
              f"{agree['documents_changed']['curator']:,}, datatrove "
              f"{agree['documents_changed']['datatrove']:,}; dropped (nothing left): curator "
              f"{agree['documents_dropped']['curator']:,}, datatrove "
              f"{agree['documents_dropped']['datatrove']:,}."]
    harness.record(args.results, "\n".join(lines),
                   figures={"corpus": made, "runs": runs, "agreement": agree})
    print("\n".join(lines))


if __name__ == "__main__":
    main()
