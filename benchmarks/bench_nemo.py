"""curator against NeMo Curator 1.4 on CPU, side by side in one run, on the same files:

* English heuristics: NeMo's own 28-filter English pipeline (its YAML) on Ray Data vs
  ``curate run`` of read_jsonl -> heuristic_filter(presets: [nemo_en]) -> write_jsonl, on the 3141
  real English documents of bench_heuristics; decisions compared document by document.
* Language ID: NeMo's ``FastTextLangId`` ScoreFilter on Ray Data vs ``curate run`` of read_jsonl
  -> langid -> write_jsonl, both with the same ``lid.176.ftz``, on the lingua sentences; accuracy
  of each against the labels.

Both sides run as the user runs them (a subprocess each, all cores of the machine) and are
measured whole by ``proctree``: documents per wall second, and documents per CPU-second of the
whole process tree (Ray's daemons and workers, Dask's scheduler and workers included) = the
per-core figure. NeMo runs in its own virtualenv (``make .venv-nemo``), since its pins
(trafilatura, fasttext, pandas) differ from ours.

    python benchmarks/bench_nemo.py [--nemo-python .venv-nemo/bin/python] [--repeat 2]
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import sys
import tempfile
from ast import literal_eval
from collections import Counter
from pathlib import Path

import harness
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from heuristic_docs import CORPUS, english_documents
from proctree import Measured, measure

from curator.stages.langid import bundled_model

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CURATE = str(Path(sys.executable).parent / "curate")


def write_split(docs: list[dict], folder: Path, files: int) -> None:
    folder.mkdir(parents=True)
    for k in range(files):
        with open(folder / f"part-{k}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in docs[k::files])


def read_records(folder: Path) -> list[dict]:
    out = []
    for path in sorted(folder.rglob("*.jsonl*")):
        opener = gzip.open if path.suffix == ".gz" else open
        if path.suffix == ".zst":
            import zstandard

            with open(path, "rb") as raw:
                text = zstandard.ZstdDecompressor().stream_reader(raw).read().decode()
        else:
            with opener(path, "rt", encoding="utf-8") as f:
                text = f.read()
        out += [json.loads(line) for line in text.splitlines() if line.strip()]
    return out


def run_ours(src: Path, out: Path, stage: dict) -> Measured:
    config = {"name": out.name, "output": str(out), "stages": [
        {"type": "read_jsonl", "path": f"{src}/*.jsonl"}, stage,
        {"type": "write_jsonl"}]}
    path = out.parent / f"{out.name}.yaml"
    path.write_text(yaml.safe_dump(config))
    result = measure([CURATE, "run", str(path)])
    if result.returncode:
        raise SystemExit(f"curate run failed:\n{result.output[-3000:]}")
    return result


def run_nemo(python: str, mode: str, src: Path, out: Path) -> Measured:
    cmd = [python, str(HERE / "nemo_peer.py"), mode, str(src), str(out)]
    if mode == "langid":
        cmd += ["--model", str(bundled_model())]
    result = measure(cmd)
    if result.returncode:
        raise SystemExit(f"NeMo Curator failed:\n{result.output[-3000:]}")
    return result


def rates(n: int, m: Measured) -> str:
    return (f"{m.seconds:.1f} | {n / m.seconds:,.0f} | {m.cpu_seconds:.1f} | "
            f"{n / m.cpu_seconds:,.0f} | {m.peak_rss_mb:,.0f}")


def heuristics(work: Path, nemo_python: str, repeat: int) -> list[str]:
    docs = english_documents()
    src = work / "en"
    write_split(docs, src, 2)
    ours, nemo = [], []
    for r in range(repeat):
        nemo.append(run_nemo(nemo_python, "english", src, work / f"nemo-en-{r}"))
        ours.append(run_ours(src, work / f"ours-en-{r}",
                             {"type": "heuristic_filter", "presets": ["nemo_en"]}))
    best_o = min(ours, key=lambda m: m.cpu_seconds)
    best_n = min(nemo, key=lambda m: m.cpu_seconds)
    kept_nemo = {d["id"] for d in read_records(work / "nemo-en-0")}
    kept_ours = {d["id"] for d in read_records(work / "ours-en-0" / "write_jsonl")}
    ids = [d["id"] for d in docs]
    agree = sum((i in kept_nemo) == (i in kept_ours) for i in ids)
    flips = Counter("kept by NeMo only" if i in kept_nemo else "kept by curator only"
                    for i in ids if (i in kept_nemo) != (i in kept_ours))
    n = len(docs)
    return [
        f"## English heuristics ({n} documents, 22 MB; NeMo's 28 filters, its thresholds)", "",
        "| system | wall s | docs/s | CPU s (tree) | docs per CPU-second | peak RSS MB |",
        "|---|---|---|---|---|---|",
        f"| NeMo Curator 1.4, Ray Data, best of {repeat} | {rates(n, best_n)} |",
        f"| curator `curate run`, best of {repeat} | {rates(n, best_o)} |", "",
        f"Per core (documents per CPU-second): **{best_n.cpu_seconds / best_o.cpu_seconds:.1f}x"
        f"** NeMo; wall clock {best_n.seconds / best_o.seconds:.1f}x. Kept: NeMo "
        f"{len(kept_nemo)}, curator {len(kept_ours)}; same decision on {agree}/{n} documents "
        f"({100 * agree / n:.2f} %){'; ' + dict(flips).__repr__() if flips else ''}.", ""]


def langid(work: Path, nemo_python: str, repeat: int) -> list[str]:
    sentences = []
    for path in sorted((CORPUS / "lingua_langid" / "sentences").glob("*.txt.gz")):
        lang = path.name.split(".")[0]
        with gzip.open(path, "rt", encoding="utf-8") as f:
            sentences += [{"id": f"{lang}-{i}", "text": t}
                          for i, t in enumerate(f.read().splitlines()) if t.strip()]
    src = work / "lid"
    write_split(sentences, src, 2)
    ours, nemo = [], []
    for r in range(repeat):
        nemo.append(run_nemo(nemo_python, "langid", src, work / f"nemo-lid-{r}"))
        ours.append(run_ours(src, work / f"ours-lid-{r}", {"type": "langid"}))
    best_o = min(ours, key=lambda m: m.cpu_seconds)
    best_n = min(nemo, key=lambda m: m.cpu_seconds)
    truth = {d["id"]: d["id"].split("-")[0] for d in sentences}
    nemo_lang = {d["id"]: literal_eval(d["language"])[1]  # NeMo writes str([score, lang])
                 for d in read_records(work / "nemo-lid-0")}
    ours_lang = {d["id"]: d["lang"] for d in read_records(work / "ours-lid-0" / "write_jsonl")}

    def accuracy(pred: dict, lang: str | None = None) -> float:
        keys = [k for k in truth if lang is None or truth[k] == lang]
        return sum(pred.get(k) == truth[k] for k in keys) / len(keys)

    same = sum(nemo_lang.get(k) == ours_lang.get(k) for k in truth)
    n = len(sentences)
    return [
        f"## Language ID ({n} lingua sentences, 75 languages; lid.176.ftz on both sides)", "",
        "| system | wall s | docs/s | CPU s (tree) | docs per CPU-second | peak RSS MB |",
        "|---|---|---|---|---|---|",
        f"| NeMo Curator 1.4 FastTextLangId, Ray Data, best of {repeat} | {rates(n, best_n)} |",
        f"| curator `curate run` langid, best of {repeat} | {rates(n, best_o)} |", "",
        f"Per core: **{best_n.cpu_seconds / best_o.cpu_seconds:.1f}x** NeMo; wall clock "
        f"{best_n.seconds / best_o.seconds:.1f}x. Accuracy (label = file language, exact "
        f"code): NeMo {accuracy(nemo_lang):.4f}, curator {accuracy(ours_lang):.4f}; ja "
        f"{accuracy(nemo_lang, 'ja'):.3f} / {accuracy(ours_lang, 'ja'):.3f}; en "
        f"{accuracy(nemo_lang, 'en'):.3f} / {accuracy(ours_lang, 'en'):.3f} (NeMo / curator). "
        f"Same label on {same}/{n} sentences.", ""]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nemo-python", default=str(REPO / ".venv-nemo" / "bin" / "python"))
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out", default=str(HERE / "results_nemo.md"))
    args = parser.parse_args()
    lines = ["# curator vs NeMo Curator 1.4 (CPU)", "",
             f"`python benchmarks/bench_nemo.py --repeat {args.repeat}` on {platform.machine()}, "
             f"{__import__('os').cpu_count()} cores, Python {platform.python_version()}. Both "
             "sides read the same JSONL files (2 per input) and use every core; 'per core' = "
             "documents per CPU-second of the whole process tree.", ""]
    with tempfile.TemporaryDirectory() as tmp:
        lines += heuristics(Path(tmp), args.nemo_python, args.repeat)
        lines += langid(Path(tmp), args.nemo_python, args.repeat)
    harness.record(args.out, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
