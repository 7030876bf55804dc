"""bench_classifier.py --part bert: a FineWeb-Edu-architecture classifier (bert-base config, one
regression output, random weights, ~110 M parameters) over real web text, CPU, classifier_filter
against transformers' ``pipeline("text-classification", function_to_apply="none")`` at batch 32.

Documents (classifier_docs.py), each distinct: ``real`` (the default) real documents (web pages'
extracted text, Wikipedia paragraphs, book passages) chosen so that their lengths follow Common
Crawl pages' text; or ``drawn``, lengths from that distribution filled with real sentences.
Tokenizer: WordPiece (BERT's uncased normalisation, 30,522 entries) trained on the corpus's
sentences. The documents go through in
``--blocks`` blocks, the systems' order reversed from one block to the next, so that a change
in the shared machine's load falls on both; every system reads every document once."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from classifier_docs import (
    describe,
    describe_lengths,
    english_sentences,
    real_documents,
    web_like_documents,
)

from curator import ClassifierFilter, Pipeline, ReadJsonl, WriteParquet
from curator.stages.filters.classifier_torch import (
    CPU_SPREAD,
    batch_encoder,
    length_batches,
    token_ids,
)

BASELINE_BATCH = 32
MAX_LENGTH = 512


def build_model(folder: Path, texts: list[str]) -> Path:
    """FineWeb-Edu's architecture: bert-base (12 layers, 768 wide, 512 positions), one
    regression output; a WordPiece vocabulary trained on ``texts``; seeded random weights."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wordpiece.normalizer = normalizers.BertNormalizer(lowercase=True)
    wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wordpiece.train_from_iterator(texts, trainers.WordPieceTrainer(
        vocab_size=30522, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    tokenizer = BertTokenizer(vocab=wordpiece.get_vocab(), model_max_length=MAX_LENGTH)
    config = BertConfig(vocab_size=len(tokenizer.get_vocab()), num_labels=1,
                        problem_type="regression", id2label={0: "LABEL_0"},
                        label2id={"LABEL_0": 0})
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _percentiles(values: list[int]) -> str:
    p = np.percentile(values, [10, 25, 50, 75, 90, 99])
    return " / ".join(f"{v:,.0f}" for v in p) + f" (max {max(values):,})"


def baseline(model: Path, texts: list[str]) -> tuple[float, float, np.ndarray]:
    """transformers' pipeline at batch 32 (truncation at the model's 512 tokens): seconds,
    CPU seconds, scores."""
    import torch
    from transformers import pipeline

    pipe = pipeline("text-classification", model=str(model), device="cpu",
                    dtype=torch.float32, function_to_apply="none")
    start, cpu = time.perf_counter(), time.process_time()
    out = pipe(texts, batch_size=BASELINE_BATCH, truncation=True)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return seconds, cpu, np.array([o["score"] for o in out])


def ours(model: Path, docs: list[dict], work: Path, shards: int, precision: str = "fp32",
         **where) -> tuple[float, float, dict[str, float]]:
    """``read_jsonl -> classifier_filter -> write_parquet`` over ``docs`` in ``shards`` JSONL
    files (model loading included): seconds, this process's CPU seconds, score by id."""
    inputs = work / "in"
    inputs.mkdir(parents=True)
    for s in range(shards):
        with open(inputs / f"part-{s}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in docs[s::shards])
    stage = ClassifierFilter(model=str(model), precision=precision)
    start, cpu = time.perf_counter(), time.process_time()
    Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), stage, WriteParquet()],
             output=str(work / "run")).run(progress=False, **where)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    if where.get("executor") != "local":
        cpu = float("nan")  # spent in the Dask workers, not in this process
    table = pq.read_table(work / "run" / "write_parquet", columns=["id", "quality_score"])
    return seconds, cpu, dict(zip(table.column("id").to_pylist(),
                                  table.column("quality_score").to_pylist(), strict=True))


def section(n_docs: int, blocks: int, seed: int, corpus: Path,
            documents: str = "drawn") -> tuple[list[str], dict]:
    """Markdown lines and figures; ``documents``: ``drawn`` (real sentences, drawn lengths) or
    ``real`` (real documents, lengths matched to the same distribution)."""
    from transformers import AutoTokenizer

    tmp = Path(tempfile.mkdtemp(prefix="bench-classifier-bert-"))
    sentences = english_sentences(corpus)
    if documents == "real":
        docs = real_documents(corpus, n_docs, seed)
        origins = Counter(d.pop("origin") for d in docs)
        described = ("real documents, each once (classifier_docs.real_documents): "
                     + ", ".join(f"{n:,} {origin}s" for origin, n in origins.most_common())
                     + f"; for each length drawn ({describe_lengths()}), the unused one "
                     "nearest in length")
    else:
        docs = web_like_documents(sentences, n_docs, seed)
        described = describe()
    model = build_model(tmp / "model", sentences)
    tokenizer = AutoTokenizer.from_pretrained(model)
    lengths = [len(x) for x in token_ids(batch_encoder(tokenizer, 10**6),
                                         [d["text"] for d in docs], 10**6)]
    read = np.minimum(lengths, MAX_LENGTH)
    per_block = -(-n_docs // blocks)
    block_reads = [read[k:k + per_block] for k in range(0, n_docs, per_block)]
    base_padded = sum(len(r[i:i + BASELINE_BATCH]) * r[i:i + BASELINE_BATCH].max()
                      for r in block_reads for i in range(0, len(r), BASELINE_BATCH))
    ours_padded = sum(len(b) * r[b].max() for r in block_reads
                      for b in length_batches(r, 256, 16384, CPU_SPREAD))

    def pipeline_block(block: list[dict], _: Path) -> tuple[float, float, dict[str, float]]:
        t, cpu, values = baseline(model, [d["text"] for d in block])
        return t, cpu, dict(zip([d["id"] for d in block], values, strict=True))

    systems = {  # name -> runs one block: (seconds, CPU seconds here, score by id)
        "pipeline": pipeline_block,
        "curate, 2 workers": lambda block, w: ours(model, block, w, 4, executor="dask",
                                                   workers=2),
        "curate, 1 process": lambda block, w: ours(model, block, w, 1, executor="local"),
    }
    seconds, cpu = dict.fromkeys(systems, 0.0), dict.fromkeys(systems, 0.0)
    scores: dict[str, dict[str, float]] = {name: {} for name in systems}
    load = [os.getloadavg()[0]]
    for k in range(blocks):
        block = docs[k * per_block:(k + 1) * per_block]
        names = list(systems) if k % 2 == 0 else list(reversed(systems))
        for name in names:
            t, c, s = systems[name](block, tmp / f"{name.replace(' ', '_')}-{k}")
            seconds[name] += t
            cpu[name] += c
            scores[name].update(s)
            print(f"block {k}: {name}: {t:.1f} s", file=sys.stderr, flush=True)
        load.append(os.getloadavg()[0])
    t_bf16, c_bf16, s_bf16 = ours(model, docs, tmp / "bf16", 1, "bf16", executor="local")
    load.append(os.getloadavg()[0])

    ids = [d["id"] for d in docs]
    ref = np.array([scores["pipeline"][i] for i in ids])
    diffs = {name: float(np.max(np.abs(np.array([scores[name][i] for i in ids]) - ref)))
             for name in systems}
    bf16 = np.array([s_bf16[i] for i in ids])
    fp32 = np.array([scores["curate, 1 process"][i] for i in ids])
    int_agree = float(np.mean(np.rint(np.clip(bf16, 0, 5)) == np.rint(np.clip(fp32, 0, 5))))
    rate = {name: n_docs / t for name, t in seconds.items()}

    def per_doc(cpu_seconds: float) -> str:
        return "n/a" if np.isnan(cpu_seconds) else f"{cpu_seconds / n_docs:.2f}"

    chars = [len(d["text"]) for d in docs]
    lines = [
        "# classifier_filter: a FineWeb-Edu-architecture BERT on CPU",
        "",
        f"{n_docs:,} distinct documents (seed {seed}): {described}. Model: bert-base config "
        f"(110 M parameters), one regression output, random weights, WordPiece vocabulary "
        "trained on the sentences. fp32 unless stated; torch "
        f"{__import__('torch').__version__}, transformers {__import__('transformers').__version__};"
        f" {os.cpu_count()} cores shared with other jobs (load average "
        f"{' -> '.join(f'{x:.1f}' for x in load)} over the blocks).",
        "",
        "Length, percentiles 10/25/50/75/90/99: characters " + _percentiles(chars) + "; tokens "
        + _percentiles(lengths) + f"; {np.mean(np.array(lengths) > MAX_LENGTH):.0%} longer than "
        f"the {MAX_LENGTH} tokens the model reads. Padded tokens through the model: pipeline "
        f"(batches of 32 in document order) {base_padded:,}; classifier_filter in one process "
        "(each block sorted by length, 16,384-token budget, longest within 1.1x the shortest) "
        f"{ours_padded:,}: "
        f"{base_padded / ours_padded:.2f}x fewer.",
        "",
        f"| system ({blocks} blocks, order alternating) | seconds | documents/s | vs pipeline "
        "| CPU s per document | max abs score diff |",
        "|---|---:|---:|---:|---:|---:|",
        *(f"| {name} | {seconds[name]:.1f} | {rate[name]:.2f} | "
          f"{rate[name] / rate['pipeline']:.2f}x | {per_doc(cpu[name])} | {diffs[name]:.1e} |"
          for name in systems),
        f"| curate, 1 process, precision bf16 (CPU autocast) | {t_bf16:.1f} | "
        f"{n_docs / t_bf16:.2f} | {n_docs / t_bf16 / rate['pipeline']:.2f}x | "
        f"{per_doc(c_bf16)} | {float(np.max(np.abs(bf16 - fp32))):.1e} vs fp32 |",
        "",
        "pipeline: `pipeline(\"text-classification\", function_to_apply=\"none\")`, "
        "`batch_size=32, truncation=True`, one process, torch's 2 threads, model loaded before "
        "the clock. curate: `read_jsonl -> classifier_filter -> write_parquet` "
        "(`Pipeline.run`), model loading, reading and writing included; 2 workers: the default "
        "Dask executor on 2 cores (a worker per core, 1 torch thread each; the block in 4 "
        "JSONL files); 1 process: `executor: local`, 2 torch threads. bf16: median abs diff "
        f"{float(np.median(np.abs(bf16 - fp32))):.1e}; FineWeb-Edu's integer score agrees on "
        f"{int_agree:.1%} of documents.",
    ]
    shutil.rmtree(tmp, ignore_errors=True)
    figures = {"docs": n_docs, "documents": documents, "seconds": seconds,
               "docs_per_s": rate, "max_abs_diff": diffs, "bf16_seconds": t_bf16,
               "bf16_max_abs_diff": float(np.max(np.abs(bf16 - fp32))),
               "padded_tokens": {"pipeline": int(base_padded), "ours": int(ours_padded)}}
    return lines, figures
