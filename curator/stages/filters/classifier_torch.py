"""Batched torch inference for encoder classifiers (Hugging Face and NeMo Curator checkpoints).

Texts are tokenized once, truncated at the model's limit, in chunks of :data:`CHUNK` (by the
tokenizer's Rust backend where it has one). A chunk's texts are sorted by token count and cut
into batches by a token budget, so that a batch is padded only to the longest of texts of
about its length (a batch with no padding goes without an attention mask, which lets
attention take its fastest kernel); the outputs go back to the texts' order. The next chunk is
tokenized, batched and padded (into pinned memory for a GPU) on a CPU thread while the model
runs this one's batches. All of it under ``torch.inference_mode``. On the CPU: fp32 on the
worker's cores (torch threads), or bf16 autocast. On a GPU: bf16 weights where asked
(``precision``; faster than autocast, docs/classifier.md) and several batches in flight, their
outputs copied back asynchronously."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

from curator.stages.filters.classifier_heads import (
    ModelScores,
    classifier_scores,
    regression_scores,
)

#: Batches a GPU runs ahead of the host reading their outputs.
IN_FLIGHT = 3
#: Texts tokenized at a time (the next chunk while the model runs this one).
CHUNK = 4096
#: Padded tokens per forward pass when ``batch_tokens`` is unset: on the CPU, and on a GPU.
BATCH_TOKENS = {"cpu": 16_384, "cuda": 131_072}
#: On the CPU a batch's longest text is at most this times its shortest: padding costs a CPU in
#: full and small batches cost it nothing (a GPU wants its batches full instead).
CPU_SPREAD = 1.1
#: A text is tokenized from its first ``max_length * CHARS_PER_TOKEN`` characters (cut at a
#: space) when those give the model its full window; else whole. A 10 MB text is then not
#: tokenized whole for the 512 tokens a model reads.
CHARS_PER_TOKEN = 16
#: On a GPU a batch is padded to a multiple of this many tokens: fused attention kernels want
#: their rows aligned (else they copy the mask to pad it), tensor cores their tiles.
GPU_WIDTH_MULTIPLE = 8


@dataclass
class Encoder:
    """A loaded model: its tokenizer, its module (moved to the device), ``forward(input_ids,
    attention_mask) -> logits [n, outputs]``, the most tokens it reads of a text, and its
    labels."""

    tokenizer: Any
    module: Any
    forward: Callable[[Any, Any], Any]
    max_length: int
    id2label: dict[int, str]


def cpu_threads() -> int:
    """The worker's share of the cores: ``OMP_NUM_THREADS`` where set (curator's workers get
    their share there), else every core this process may run on."""
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


def head(text: str, limit: int) -> str:
    """``text`` cut before the last whitespace within its first ``limit`` characters (whole
    when shorter, or without whitespace there). Tokenizers split words at whitespace, so the
    head's tokens are the text's first tokens, but for the head's end."""
    if len(text) <= limit:
        return text
    window = text[:limit]
    cut = max(window.rfind(c) for c in " \n\t\r")
    return window[:cut].rstrip() if cut > 0 else text


def batch_encoder(tokenizer: Any, max_length: int) -> Callable[[list[str]], list[list[int]]]:
    """A function giving a batch's token ids as ``tokenizer(batch, truncation=True,
    max_length=max_length)`` does (special tokens included): from a private copy of a fast
    tokenizer's Rust backend where it has one (transformers' Python around each text was
    nearly half a GPU run's time: docs/classifier.md), else from the tokenizer."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        def encode(batch: list[str]) -> list[list[int]]:
            return tokenizer(batch, truncation=True, max_length=max_length, padding=False,
                             return_attention_mask=False, return_token_type_ids=False
                             )["input_ids"]
        return encode
    from tokenizers import Tokenizer

    own = Tokenizer.from_str(backend.to_str())
    own.enable_truncation(max_length, direction=getattr(tokenizer, "truncation_side", "right"))
    own.no_padding()
    batch_encode = getattr(own, "encode_batch_fast", own.encode_batch)  # no offsets: faster
    return lambda batch: [e.ids for e in batch_encode(batch)]


def token_ids(encode: Callable[[list[str]], list[list[int]]], texts: list[str],
              max_length: int, truncation_side: str = "right") -> list[list[int]]:
    """Each text's token ids by ``encode`` (a ``batch_encoder``), truncated at ``max_length``:
    from its head where the head fills the window (the same tokens then), else from the
    whole text."""
    if truncation_side != "right":
        return encode(texts)
    heads = [head(t, max_length * CHARS_PER_TOKEN) for t in texts]
    ids = encode(heads)
    short = [i for i, (h, t, x) in enumerate(zip(heads, texts, ids, strict=True))
             if len(h) < len(t) and len(x) < max_length]
    for i, x in zip(short, encode([texts[i] for i in short]) if short else [], strict=True):
        ids[i] = x
    return ids


def length_batches(lengths: np.ndarray, batch_size: int, batch_tokens: int,
                   spread: float | None = None) -> list[np.ndarray]:
    """Row indices sorted by length, cut into batches of at most ``batch_size`` rows whose
    padded size (rows x longest) stays within ``batch_tokens`` (one row at least); with
    ``spread``, a batch also ends before a text longer than ``spread`` times its shortest."""
    batches: list[np.ndarray] = []
    current: list[int] = []
    for i in np.argsort(lengths, kind="stable"):  # ascending: row i is the batch's longest
        if current and ((len(current) + 1) * lengths[i] > batch_tokens
                        or len(current) == batch_size
                        or (spread is not None and lengths[i] > spread * lengths[current[0]])):
            batches.append(np.array(current))
            current = []
        current.append(int(i))
    if current:
        batches.append(np.array(current))
    return batches


def padded(rows: list[list[int]], pad_id: int, pad_left: bool, multiple: int = 1
           ) -> tuple[np.ndarray, np.ndarray | None]:
    """Token ids ``[n, width]`` (the longest row, rounded up to ``multiple``) and the
    attention mask, None where no row is padded."""
    lengths = np.fromiter(map(len, rows), np.int64, len(rows))
    width = -(-int(lengths.max()) // multiple) * multiple
    real = np.arange(width) >= (width - lengths)[:, None] if pad_left else (
        np.arange(width) < lengths[:, None])
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    ids[real] = np.fromiter(chain.from_iterable(rows), np.int64, int(lengths.sum()))
    return ids, (real.astype(np.int64) if (lengths < width).any() else None)


class TorchScorer:
    """Scores per text of an ``Encoder`` on ``device`` (``cpu`` or ``cuda``), in ``precision``
    (fp32; bf16: autocast on the CPU, bf16 weights on a GPU), the forward pass through
    ``torch.compile`` where ``compiled``: its regression output, or its probability of label
    ``index`` (None: of the predicted label) and the predicted label."""

    def __init__(self, encoder: Encoder, device: str, precision: str, batch_size: int,
                 batch_tokens: int | None, threads: int | None, max_chars: int | None,
                 regression: bool, index: int | None, compiled: bool = False):
        import torch

        if device == "cpu":
            torch.set_num_threads(threads or cpu_threads())
        self.encoder = encoder
        self.device = device
        bf16 = precision == "bf16"
        self.autocast = bf16 and device == "cpu"  # a GPU runs bf16 weights instead
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens or BATCH_TOKENS["cpu" if device == "cpu" else "cuda"]
        self.spread = CPU_SPREAD if device == "cpu" else None
        self.max_chars = max_chars
        self.regression, self.index = regression, index
        encoder.module.to(device).eval()
        if bf16 and device != "cpu":
            encoder.module.to(torch.bfloat16)
        self.forward = torch.compile(encoder.forward, dynamic=True) if compiled else (
            encoder.forward)
        tokenizer = encoder.tokenizer
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.pad_left = getattr(tokenizer, "padding_side", "right") == "left"
        self.encode = batch_encoder(tokenizer, encoder.max_length)
        self.truncation_side = getattr(tokenizer, "truncation_side", "right")
        self.width_multiple = 1 if device == "cpu" else GPU_WIDTH_MULTIPLE

    def score(self, texts: list[str]) -> ModelScores:
        logits = self.logits(texts)
        if self.regression:
            return regression_scores(logits)
        return classifier_scores(logits, self.encoder.id2label, self.index)

    def _host_batches(self, texts: list[str], start: int
                      ) -> list[tuple[np.ndarray, Any, Any]]:
        """``texts`` (from position ``start``) tokenized and cut into batches: per batch its
        rows' positions, token ids ``[n, width]`` and attention mask (None where no row is
        padded), pinned for a copy to a GPU. Run on the tokenizing thread, so that the thread
        driving the GPU does nothing but launch its work."""
        import torch

        ids = token_ids(self.encode, texts, self.encoder.max_length, self.truncation_side)
        lengths = np.fromiter(map(len, ids), np.int64, len(ids))
        batches = []
        for rows in length_batches(lengths, self.batch_size, self.batch_tokens, self.spread):
            tokens, mask = padded([ids[i] for i in rows], self.pad_id, self.pad_left,
                                  self.width_multiple)
            tensors = [torch.from_numpy(tokens), *([] if mask is None else
                                                  [torch.from_numpy(mask)])]
            if self.device != "cpu":
                tensors = [t.pin_memory() for t in tensors]
            batches.append((rows + start, tensors[0], tensors[1] if mask is not None else None))
        return batches

    def logits(self, texts: list[str]) -> np.ndarray:
        """float32 ``[len(texts), outputs]``, in the texts' order."""
        import torch

        if self.max_chars:
            texts = [t[:self.max_chars] for t in texts]
        parts: list[tuple[np.ndarray, Any, Any]] = []  # rows, outputs, their copy's event
        pending: deque[int] = deque()
        on_gpu = self.device != "cpu"
        with ThreadPoolExecutor(1) as tokenizing, torch.inference_mode(), torch.autocast(
                "cuda" if on_gpu else "cpu", dtype=torch.bfloat16, enabled=self.autocast):
            ahead = tokenizing.submit(self._host_batches, texts[:CHUNK], 0)
            for start in range(0, len(texts), CHUNK):
                batches = ahead.result()
                if start + CHUNK < len(texts):
                    ahead = tokenizing.submit(self._host_batches,
                                              texts[start + CHUNK:start + 2 * CHUNK],
                                              start + CHUNK)
                for rows, ids, mask in batches:
                    if on_gpu:
                        ids = ids.to(self.device, non_blocking=True)
                        mask = None if mask is None else mask.to(self.device, non_blocking=True)
                    out = self.forward(ids, mask).float()
                    if not on_gpu:
                        parts.append((rows, out, None))
                        continue
                    # copied back asynchronously; read once IN_FLIGHT later batches run
                    host = torch.empty(out.shape, dtype=torch.float32, pin_memory=True)
                    host.copy_(out, non_blocking=True)
                    event = torch.cuda.Event()
                    event.record()
                    parts.append((rows, host, event))
                    pending.append(len(parts) - 1)
                    while len(pending) > IN_FLIGHT:
                        parts[pending.popleft()][2].synchronize()
        if on_gpu:
            torch.cuda.synchronize()
        result = np.empty((len(texts), parts[0][1].shape[1] if parts else 0), np.float32)
        for rows, out, _ in parts:
            result[rows] = out.numpy()
        return result
