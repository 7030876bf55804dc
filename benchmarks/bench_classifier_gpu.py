"""Quality-classifier inference on one GPU: classifier_filter against the plain ``transformers``
loop at batch 32, both bf16, for the two published architectures, and the GPU's scores against
the CPU path's.

Models (random weights, seeded; nothing downloaded), heads briefly trained so that a threshold
cuts through a spread of scores, not a constant:
- ``bert``: FineWeb-Edu's classifier (bert-base, 110 M parameters, one regression output, 512
  positions), a WordPiece vocabulary trained on the corpus's sentences; scored as published, the
  raw output and ``int_score >= 3``.
- ``deberta``: NeMo Curator's quality classifier (DeBERTa-v3-base encoder, 128,100-entry
  embedding, relative attention; a linear ``fc`` over the first token, three labels), saved as
  NeMo's ``PyTorchModelHubMixin`` saves it; the same tokenizer.
Head training: the encoder's pooled output over 4,096 other documents, the head fitted (Adam,
300 full-batch steps) to a label the text carries: the mean word length, standardised and put on
the 0-5 scale (regression), or its terciles as High / Medium / Low (classifier); the fitted
outputs then spread as the label is (random features explain little of it).

Documents: classifier_docs.py (lengths of Common Crawl pages' text, real English sentences).

Systems, on one GPU, in one process:
- ``plain loop``: ``tokenizer(32 texts, padding=True, truncation=True, max_length=512)`` ->
  model in bf16 (``dtype=torch.bfloat16``) -> logits to the host, batch after batch.
- ``classifier_filter``: the stage's ``process`` on one table of every document (the model
  loaded before the clock, compiled variants compiled on other documents first), ``device:
  gpu``, ``--variants`` of ``precision: bf16`` (bf16 weights), with ``torch_compile``, and
  ``autocast`` (fp32 weights under bf16 autocast).
- ``product path``: ``read_parquet -> classifier_filter -> write_parquet`` through
  ``Pipeline.run`` (default executor: a Dask cluster with a GPU worker), model loading included.
Agreement: the CPU path (fp32, every core) on ``--agree`` documents against each GPU run's
scores and GPU fp32's: largest and median difference, the decisions that flip at the threshold.

    PYTHONPATH=. python benchmarks/bench_classifier_gpu.py --corpus .bench-corpus \\
        [--arch bert,deberta] [--docs 100000] [--baseline-docs 20000] [--agree 1000] \\
        [--variants bf16,compile] [--product-variant bf16|none] [--breakdown]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness
from classifier_docs import describe, english_sentences, web_like_documents

from curator import ClassifierFilter, Pipeline, ReadParquet, WriteParquet

MAX_LENGTH = 512
BASELINE_BATCH = 32
LABELS = {0: "High", 1: "Medium", 2: "Low"}
#: ``--tiny``: 2 layers 64 wide, on the CPU where there is no GPU (a smoke test of the script).
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 128}
SIZE: dict = {}
DEVICE, GPU = "cuda", "gpu"  # torch's name, the stage's


def log(message: str) -> None:
    """A progress line on stderr, with the seconds since the script started."""
    print(f"[{time.perf_counter() - STARTED:7.1f} s] {message}", file=sys.stderr, flush=True)


STARTED = time.perf_counter()


def sync() -> None:
    import torch

    if DEVICE == "cuda":
        torch.cuda.synchronize()


def tokenizer_files(folder: Path, sentences: list[str], vocab: int) -> None:
    """A WordPiece tokenizer (BERT's uncased normalisation) trained on ``sentences``."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertTokenizerFast

    wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wordpiece.normalizer = normalizers.BertNormalizer(lowercase=True)
    wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wordpiece.train_from_iterator(sentences, trainers.WordPieceTrainer(
        vocab_size=vocab, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    vocab_file = folder / "vocab.txt"
    folder.mkdir(parents=True, exist_ok=True)
    ordered = sorted(wordpiece.get_vocab().items(), key=lambda kv: kv[1])
    vocab_file.write_text("".join(f"{token}\n" for token, _ in ordered), encoding="utf-8")
    BertTokenizerFast(vocab_file=str(vocab_file), model_max_length=MAX_LENGTH).save_pretrained(
        folder)


#: The regression label's mean and deviation on the 0-5 scale: about a third of documents
#: reach FineWeb-Edu's ``int_score >= 3``.
LABEL_MEAN, LABEL_SPREAD = 2.0, 1.0


def word_length_label(texts: list[str]) -> np.ndarray:
    """Mean word length per text, standardised, on the 0-5 scale."""
    mean = np.array([np.mean([len(w) for w in t.split()] or [0]) for t in texts])
    return np.clip(LABEL_MEAN + LABEL_SPREAD * (mean - mean.mean()) / (mean.std() or 1), 0, 5)


def fit_head(head, features, target, regression: bool) -> None:
    """The linear ``head`` fitted to ``target`` over ``features`` (Adam, 300 steps), then its
    outputs spread: the label's mean and deviation (regression), logits of deviation 2."""
    import torch

    x = features.float()
    y = torch.as_tensor(target, device=x.device)
    with torch.enable_grad():
        head.float().requires_grad_(True)
        optimiser = torch.optim.Adam(head.parameters(), lr=1e-2)
        for _ in range(300):
            optimiser.zero_grad()
            out = head(x)
            loss = (torch.nn.functional.mse_loss(out[:, 0], y.float()) if regression
                    else torch.nn.functional.cross_entropy(out, y.long()))
            loss.backward()
            optimiser.step()
        head.requires_grad_(False)
        out = head(x)  # random features explain little: spread the outputs as the label is
        centre, spread = (out[:, 0].mean(), out[:, 0].std()) if regression else (
            out.mean(dim=0), out.std(dim=0).mean())
        scale = (LABEL_SPREAD if regression else 2.0) / spread
        head.weight.mul_(scale)
        head.bias.copy_((head.bias - centre) * scale + (LABEL_MEAN if regression else 0.0))


def first_tokens(tokenizer, texts: list[str], device: str):
    return tokenizer(texts, padding=True, truncation=True, max_length=MAX_LENGTH,
                     return_tensors="pt").to(device)


def build_bert(folder: Path, sentences: list[str], train_texts: list[str]) -> Path:
    """FineWeb-Edu's architecture, its regression head fitted to the word-length label."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tokenizer_files(folder, sentences, 30522)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    config = BertConfig(vocab_size=len(tokenizer), num_labels=1, problem_type="regression",
                        id2label={0: "LABEL_0"}, label2id={"LABEL_0": 0}, **SIZE)
    torch.manual_seed(0)
    model = BertForSequenceClassification(config).to(DEVICE).eval()
    with torch.inference_mode(), torch.autocast(DEVICE, dtype=torch.bfloat16):
        pooled = torch.cat([model.bert(**first_tokens(tokenizer, train_texts[i:i + 64], DEVICE)
                                       ).pooler_output.float()
                            for i in range(0, len(train_texts), 64)])
    fit_head(model.classifier, pooled.clone(), word_length_label(train_texts), True)
    model.cpu().save_pretrained(folder)
    return folder


def deberta_config():
    from transformers import DebertaV2Config

    return DebertaV2Config(**{  # microsoft/deberta-v3-base's config.json
        "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
        "intermediate_size": 3072, **SIZE},
        vocab_size=128100, hidden_act="gelu", max_position_embeddings=512,
        relative_attention=True, position_buckets=256, norm_rel_ebd="layer_norm",
        share_att_key=True, pos_att_type=["p2c", "c2p"], position_biased_input=False,
        layer_norm_eps=1e-7, max_relative_positions=-1, type_vocab_size=0, pad_token_id=0)


def build_deberta(folder: Path, sentences: list[str], train_texts: list[str]) -> tuple[Path, Path]:
    """NeMo Curator's quality-classifier layout: checkpoint folder and the backbone's config."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModel, AutoTokenizer

    backbone = folder.with_name(folder.name + "-backbone")
    deberta_config().save_pretrained(backbone)
    tokenizer_files(folder, sentences, 30522)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    torch.manual_seed(0)
    encoder = AutoModel.from_config(deberta_config()).to(DEVICE).eval()
    fc = torch.nn.Linear(encoder.config.hidden_size, len(LABELS)).to(DEVICE)
    with torch.inference_mode(), torch.autocast(DEVICE, dtype=torch.bfloat16):
        first = torch.cat([encoder(**first_tokens(tokenizer, train_texts[i:i + 64], DEVICE)
                                   ).last_hidden_state[:, 0].float()
                           for i in range(0, len(train_texts), 64)])
    label = word_length_label(train_texts)
    terciles = np.digitize(label, np.quantile(label, [1 / 3, 2 / 3]))  # 0 low .. 2 high
    fit_head(fc, first.clone(), 2 - terciles, False)  # index 0 High, 1 Medium, 2 Low
    module = torch.nn.ModuleDict({"model": encoder, "fc": fc}).cpu()
    save_file({k: v.contiguous() for k, v in module.state_dict().items()},
              str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({
        "base_model": "microsoft/deberta-v3-base", "fc_dropout": 0.2,
        "id2label": {str(k): v for k, v in LABELS.items()},
        "label2id": {v: k for k, v in LABELS.items()}}), encoding="utf-8")
    return folder, backbone


def plain_loop(arch: str, model: Path, texts: list[str]) -> tuple[float, int]:
    """The plain loop at batch 32 in bf16: seconds, tokens through the model (padding too)."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    if arch == "bert":
        net = AutoModelForSequenceClassification.from_pretrained(model, dtype=torch.bfloat16)

        def forward(batch):
            return net(**batch).logits
    else:
        encoder = AutoModel.from_config(deberta_config())
        fc = torch.nn.Linear(encoder.config.hidden_size, len(LABELS))
        net = torch.nn.ModuleDict({"model": encoder, "fc": fc})
        net.load_state_dict(load_file(str(model / "model.safetensors")))

        def forward(batch):
            hidden = encoder(input_ids=batch["input_ids"],
                             attention_mask=batch["attention_mask"]).last_hidden_state
            return torch.softmax(fc(hidden[:, 0]), dim=1)
    net.to(device=DEVICE, dtype=torch.bfloat16).eval()
    tokens = 0
    sync()
    start = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(texts), BASELINE_BATCH):
            batch = tokenizer(texts[i:i + BASELINE_BATCH], padding=True, truncation=True,
                              max_length=MAX_LENGTH, return_tensors="pt").to(DEVICE)
            tokens += batch["input_ids"].numel()
            forward(batch).float().cpu()
    return time.perf_counter() - start, tokens


def stage_for(arch: str, model: Path, backbone: Path | None, **params) -> ClassifierFilter:
    if arch == "bert":
        return ClassifierFilter(model=str(model), min_int_score=3, **params)
    return ClassifierFilter(model=str(model), backbone=str(backbone), label="High",
                            threshold=0.5, **params)


def timed_process(stage: ClassifierFilter, table: pa.Table,
                  tweak: Callable[[ClassifierFilter], None] | None = None
                  ) -> tuple[float, float, np.ndarray]:
    """(load seconds, scoring seconds, scores) of the stage's ``process`` on ``table``."""
    start = time.perf_counter()
    stage.setup()
    if tweak:
        tweak(stage)
    load = time.perf_counter() - start
    _, seconds, scores = _timed_again(stage, table)
    return load, seconds, scores


def _timed_again(stage: ClassifierFilter, table: pa.Table) -> tuple[float, float, np.ndarray]:
    """(0, scoring seconds, scores) of an already set-up stage's ``process`` on ``table``."""
    sync()
    start = time.perf_counter()
    out = stage.process(table)
    seconds = time.perf_counter() - start
    score = out.signals["quality_score"]  # every row's, in the table's order
    return 0.0, seconds, score.to_numpy(zero_copy_only=False).astype(float)


def breakdown(stage: ClassifierFilter, texts: list[str]) -> dict[str, float]:
    """Seconds of each part of the scorer's work on ``texts``, one after another (the scorer
    overlaps them): tokenizing, cutting and padding batches on the host and copying them to
    the GPU, the model alone over batches already there."""
    import torch

    from curator.stages.filters.classifier_torch import CHUNK, length_batches, padded, token_ids

    scorer = stage._scorer
    start = time.perf_counter()
    ids = [x for i in range(0, len(texts), CHUNK)
           for x in token_ids(scorer.encode, texts[i:i + CHUNK], scorer.encoder.max_length)]
    tokenize = time.perf_counter() - start
    start = time.perf_counter()
    batches = []
    for i in range(0, len(ids), CHUNK):
        lengths = np.array([len(x) for x in ids[i:i + CHUNK]])
        for rows in length_batches(lengths, scorer.batch_size, scorer.batch_tokens,
                                   scorer.spread):
            tokens, mask = padded([ids[i + k] for k in rows], scorer.pad_id, scorer.pad_left,
                                  scorer.width_multiple)
            host = [None if a is None else torch.from_numpy(a) for a in (tokens, mask)]
            if DEVICE == "cuda":
                host = [None if t is None else t.pin_memory() for t in host]
            batches.append([None if t is None else t.to(DEVICE, non_blocking=True)
                            for t in host])
    sync()
    pad = time.perf_counter() - start
    start = time.perf_counter()
    with torch.inference_mode(), torch.autocast(DEVICE, dtype=torch.bfloat16,
                                                enabled=scorer.autocast):
        for batch in batches:
            scorer.forward(*batch)
    sync()
    return {"tokenize": tokenize, "pad_and_copy": pad, "model": time.perf_counter() - start,
            "batches": len(batches)}


def autocast(stage: ClassifierFilter) -> None:
    """Variant: fp32 weights under bf16 autocast (the stage runs bf16 weights on a GPU)."""
    stage._scorer.encoder.module.float()
    stage._scorer.autocast = True


#: ``--variants``: name -> (row label, stage parameters, tweak after setup).
VARIANTS: dict[str, tuple[str, dict, Callable[[ClassifierFilter], None] | None]] = {
    "bf16": ("classifier_filter (bf16)", {"precision": "bf16"}, None),
    "autocast": ("classifier_filter (bf16 autocast)", {"precision": "bf16"}, autocast),
    "compile": ("classifier_filter (bf16, torch.compile)",
                {"precision": "bf16", "torch_compile": True}, None),
}


def product_path(stage: ClassifierFilter, docs: list[dict], work: Path) -> float:
    parts = work / "in"
    parts.mkdir(parents=True)
    per = -(-len(docs) // 8)
    for k in range(8):
        pq.write_table(pa.Table.from_pylist(docs[k * per:(k + 1) * per]),
                       parts / f"part-{k}.parquet")
    start = time.perf_counter()
    Pipeline([ReadParquet(path=f"{parts}/*.parquet"), stage, WriteParquet()],
             output=str(work / "run")).run(progress=False)
    return time.perf_counter() - start


def agreement_scores(arch: str, model: Path, backbone: Path | None, table: pa.Table, args
                     ) -> tuple[float, np.ndarray, int]:
    """The CPU path's fp32 scores of the first ``--agree`` documents, 100 at a time, stopping
    early once ``--agree-seconds`` are spent: seconds, scores, torch threads."""
    import torch

    stage = stage_for(arch, model, backbone, device="cpu", precision="fp32")
    stage.setup()
    start, parts = time.perf_counter(), []
    for offset in range(0, args.agree, 100):
        out = stage.process(table.slice(offset, min(100, args.agree - offset)))
        parts.append(out.signals["quality_score"].to_numpy(zero_copy_only=False).astype(float))
        if time.perf_counter() - start > args.agree_seconds:
            break
    return time.perf_counter() - start, np.concatenate(parts), torch.get_num_threads()


def flips(arch: str, a: np.ndarray, b: np.ndarray) -> int:
    if arch == "bert":
        return int(np.sum((np.rint(np.clip(a, 0, 5)) >= 3) != (np.rint(np.clip(b, 0, 5)) >= 3)))
    return int(np.sum((a >= 0.5) != (b >= 0.5)))


def run_arch(arch: str, args, sentences: list[str], tmp: Path) -> tuple[list[str], dict]:
    import torch

    docs = web_like_documents(sentences, args.docs, args.seed)
    train = [d["text"] for d in web_like_documents(sentences, 4096, args.seed + 1)]
    log(f"{arch}: {len(docs):,} documents drawn")
    start = time.perf_counter()
    if arch == "bert":
        model, backbone = build_bert(tmp / "bert", sentences, train), None
    else:
        model, backbone = build_deberta(tmp / "deberta", sentences, train)
    built = time.perf_counter() - start
    log(f"{arch}: model built, head fitted")
    table = pa.Table.from_pylist(docs)
    texts = [d["text"] for d in docs]
    base_texts = texts[:args.baseline_docs]
    base_s, base_tokens = plain_loop(arch, model, base_texts)
    log(f"{arch}: plain loop {len(base_texts) / base_s:,.0f} documents/s")
    rows: dict[str, dict] = {"plain loop (batch 32, bf16)": {
        "docs": len(base_texts), "seconds": base_s, "tokens": base_tokens}}
    scores: dict[str, np.ndarray] = {}
    warm_table = pa.Table.from_pylist(web_like_documents(sentences, 4000, args.seed + 2))
    timed_process(stage_for(arch, model, backbone, device=GPU, precision="bf16"),
                  warm_table)  # untimed: the first run's CUDA and cuBLAS start-up
    for variant in args.variants.split(","):
        name, params, tweak = VARIANTS[variant]
        stage = stage_for(arch, model, backbone, device=GPU, **params)
        if "torch_compile" in params:  # compiled before the clock, on documents not timed
            load, seconds, _ = timed_process(stage, warm_table, tweak)
            log(f"{arch}: {name} compiled and warmed in {load + seconds:.1f} s")
            load, seconds, values = _timed_again(stage, table)
        else:
            load, seconds, values = timed_process(stage, table, tweak)
        rows[name] = {"docs": len(texts), "seconds": seconds, "load_seconds": load}
        log(f"{arch}: {name} {len(texts) / seconds:,.0f} documents/s (load {load:.1f} s)")
        if args.breakdown and "torch_compile" not in params:
            rows[name]["parts"] = parts = breakdown(stage, texts)
            log(f"{arch}: {name} parts: " + ", ".join(f"{k} {v:.1f}" for k, v in parts.items()))
        scores[name] = values
        del stage
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
    cpu_s, cpu, cpu_threads = agreement_scores(arch, model, backbone, table, args)
    n_agree = len(cpu)
    log(f"{arch}: CPU fp32 ({cpu_threads} torch threads) on {n_agree:,} documents in "
        f"{cpu_s:.1f} s")
    _, _, gpu32 = timed_process(stage_for(arch, model, backbone, device=GPU,
                                          precision="fp32"), table.slice(0, n_agree))
    if args.product_variant != "none":
        product_params = VARIANTS[args.product_variant][1]
        product = product_path(stage_for(arch, model, backbone, **product_params), docs,
                               tmp / f"product-{arch}")
        rows[f"product path ({args.product_variant}; read, score, write; load included)"] = {
            "docs": len(texts), "seconds": product}
        log(f"{arch}: product path {len(texts) / product:,.0f} documents/s")
    tokens_read = sum(min(n, MAX_LENGTH) for n in _token_counts(model, texts))
    base_rate = rows["plain loop (batch 32, bf16)"]["docs"] / base_s
    title = ("FineWeb-Edu BERT regression" if arch == "bert"
             else "NeMo DeBERTa-v3-base quality classifier")
    lines = [f"### {arch}: {title}",
             "",
             f"Model built and head fitted in {built:.0f} s. {len(texts):,} documents, "
             f"{tokens_read:,} tokens read (at most {MAX_LENGTH} each; "
             f"{tokens_read / len(texts):.0f} per document).",
             "",
             "| system | documents | seconds | documents/s | tokens/s | vs plain loop |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, row in rows.items():
        rate = row["docs"] / row["seconds"]
        tokens = row.get("tokens", tokens_read * row["docs"] / len(texts))
        lines.append(f"| {name} | {row['docs']:,} | {row['seconds']:.1f} | {rate:,.0f} | "
                     f"{tokens / row['seconds']:,.0f} | {rate / base_rate:.2f}x |")
    parted = {name: row["parts"] for name, row in rows.items() if "parts" in row}
    if parted:
        lines += ["", "Where a run's time goes (each part alone, one after another; the run "
                  "overlaps them), seconds:", "",
                  "| run | tokenize (host) | cut, pad, copy (host) | model alone (GPU) | "
                  "batches |", "|---|---:|---:|---:|---:|"]
        lines += [f"| {name} | {p['tokenize']:.1f} | {p['pad_and_copy']:.1f} | "
                  f"{p['model']:.1f} | {p['batches']} |" for name, p in parted.items()]
    compared = {"GPU fp32": gpu32, **{name.removeprefix("classifier_filter ").strip("()"):
                                      values[:n_agree] for name, values in scores.items()}}
    agree = {name: {"max": float(np.nanmax(np.abs(values - cpu))),
                    "median": float(np.nanmedian(np.abs(values - cpu))),
                    "flips": flips(arch, values, cpu)} for name, values in compared.items()}
    lines += ["",
              f"Agreement on {n_agree:,} documents, CPU fp32 ({os.cpu_count()} cores, "
              f"{cpu_s:.1f} s) as reference (score spread: deviation {np.nanstd(cpu):.2f}; "
              "decision " + ("int_score >= 3" if arch == "bert" else "P(High) >= 0.5")
              + f", kept share {np.mean(_decide(arch, cpu)):.0%}):", "",
              "| GPU run | max abs diff | median abs diff | decisions that flip |",
              "|---|---:|---:|---:|"]
    lines += [f"| {name} | {a['max']:.1e} | {a['median']:.1e} | {a['flips']} |"
              for name, a in agree.items()]
    lines.append("")
    figures = {"rows": rows, "tokens_read": tokens_read,
               "agree": {"docs": n_agree, "cpu_seconds": cpu_s, "cpu_threads": cpu_threads,
                         **agree}}
    return lines, figures


def _decide(arch: str, scores: np.ndarray) -> np.ndarray:
    return np.rint(np.clip(scores, 0, 5)) >= 3 if arch == "bert" else scores >= 0.5


def _token_counts(model: Path, texts: list[str]) -> list[int]:
    from transformers import AutoTokenizer

    from curator.stages.filters.classifier_torch import batch_encoder, token_ids

    encode = batch_encoder(AutoTokenizer.from_pretrained(model), MAX_LENGTH)
    return [len(x) for x in token_ids(encode, texts, MAX_LENGTH)]


def main() -> None:
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", type=Path, default=Path("/work/shared/corpus"))
    parser.add_argument("--arch", default="bert,deberta")
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--baseline-docs", type=int, default=20_000)
    parser.add_argument("--agree", type=int, default=1000)
    parser.add_argument("--agree-seconds", type=float, default=150.0,
                        help="stop the CPU reference after the 100 documents that pass this")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variants", default="bf16,compile",
                        help=f"GPU runs of classifier_filter, of {', '.join(VARIANTS)}")
    parser.add_argument("--breakdown", action="store_true",
                        help="also time each part of each run alone (tokenize, pad, model)")
    parser.add_argument("--product-variant", default="bf16", choices=[*VARIANTS, "none"],
                        help="classifier_filter's parameters in the product path")
    parser.add_argument("--tiny", action="store_true", help="smoke test: tiny models")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results_classifier_gpu.md"))
    args = parser.parse_args()
    if "compile" in args.variants:
        torch._logging.set_logs(recompiles=True)  # each recompilation and its reason, on stderr
    global DEVICE, GPU
    if args.tiny:
        SIZE.update(TINY)
    if not torch.cuda.is_available():
        DEVICE, GPU = "cpu", "cpu"
    sentences = english_sentences(args.corpus)
    tmp = Path(tempfile.mkdtemp(prefix="bench-classifier-gpu-"))
    card = torch.cuda.get_device_name() if DEVICE == "cuda" else "CPU only"
    lines = ["# classifier_filter on one GPU", "",
             f"{card}; torch {torch.__version__}, transformers "
             f"{__import__('transformers').__version__}. Documents: {describe()}.", ""]
    figures = {}
    for arch in args.arch.split(","):
        arch_lines, figures[arch] = run_arch(arch, args, sentences, tmp)
        lines += arch_lines
        print("\n".join(arch_lines), flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    harness.record(args.out, "\n".join(lines), figures=figures)


if __name__ == "__main__":
    main()
