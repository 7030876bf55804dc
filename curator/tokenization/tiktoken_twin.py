"""Run a byte-level BPE ``tokenizer.json`` on tiktoken's encoder, when that gives the same ids.

GPT-2-style byte-level BPE (what ``curate tokenizer train`` and most Hugging Face BPE models
are) splits text with one regex and then merges byte pairs. tiktoken runs the same algorithm
with merge priority read from the merged token's rank, several times faster per core than the
``tokenizers`` library (``benchmarks/bench_tokenize.py``). The two agree when

* the model is plain byte-level BPE: no normalizer, a lone ``ByteLevel`` pre-tokenizer with its
  GPT-2 regex and no prefix space, no dropout, no subword prefix/suffix, no byte fallback;
* every added token is special (those are encoded as plain text on both sides, as the
  ``tokenize`` stage wants), and the 256 byte symbols are all in the vocabulary;
* merge order and token ids agree: the ``i``-th merge creates a token whose id grows with ``i``
  and exceeds both parts' ids (a trainer assigns ids in merge order), so "lowest merge index"
  and "lowest rank" pick the same pair;
* every token is reachable: the Hugging Face model encodes each token's own bytes to exactly
  that token (tiktoken takes a whole pre-token found in the vocabulary as one token).

:func:`tiktoken_twin` checks these and returns the equivalent ``tiktoken.Encoding`` or the
reason it declines. The caller still compares both encoders on real text before trusting it
(``curator.tokenization.loading``), since the conditions are necessary, not a proof.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

# The split Hugging Face's ByteLevel pre-tokenizer makes (use_regex=True), as a tiktoken pattern.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


@cache
def byte_symbols() -> dict[str, int]:
    """GPT-2's printable stand-in character for each byte → the byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def _merge_pair(merge: str | list[str]) -> tuple[str, str]:
    if isinstance(merge, str):
        left, _, right = merge.partition(" ")
        return left, right
    return merge[0], merge[1]


def _structure_problem(spec: dict[str, Any]) -> str | None:
    model = spec.get("model") or {}
    pre = spec.get("pre_tokenizer") or {}
    if pre.get("type") == "Sequence" and len(pre.get("pretokenizers", [])) == 1:
        pre = pre["pretokenizers"][0]
    checks = [
        (model.get("type") == "BPE", f"model type {model.get('type')!r} is not BPE"),
        (spec.get("normalizer") is None, "it has a normalizer"),
        (pre.get("type") == "ByteLevel", f"pre-tokenizer {pre.get('type')!r} is not ByteLevel"),
        (pre.get("use_regex", True), "ByteLevel without its regex"),
        (not pre.get("add_prefix_space", False), "ByteLevel adds a prefix space"),
        (model.get("dropout") in (None, 0, 0.0), "BPE dropout"),
        (not model.get("continuing_subword_prefix"), "a continuing-subword prefix"),
        (not model.get("end_of_word_suffix"), "an end-of-word suffix"),
        (not model.get("byte_fallback", False), "byte fallback"),
        (not model.get("ignore_merges", False), "ignore_merges"),
        (all(t.get("special") for t in spec.get("added_tokens", [])),
         "a non-special added token"),
    ]
    return next((why for ok, why in checks if not ok), None)


def byte_level_ranks(spec: dict[str, Any]) -> dict[bytes, int]:
    """Token bytes → id of every non-special token of a byte-level BPE ``tokenizer.json``
    (ranks equal the Hugging Face ids). Raises ``ValueError`` for a non-byte-level token."""
    symbols = byte_symbols()
    specials = {t["content"] for t in spec.get("added_tokens", [])}
    ranks: dict[bytes, int] = {}
    for token, rank in spec["model"]["vocab"].items():
        if token in specials:
            continue
        try:
            ranks[bytes(symbols[ch] for ch in token)] = rank
        except KeyError:
            raise ValueError(f"token {token!r} is not byte-level") from None
    return ranks


def _merge_problem(spec: dict[str, Any]) -> str | None:
    """Why merge order and ids disagree, or None."""
    vocab: dict[str, int] = spec["model"]["vocab"]
    if any(ch not in vocab for ch in byte_symbols()):
        return "a byte symbol is missing from the vocabulary"
    last = -1
    for merge in spec["model"].get("merges", []):
        left, right = _merge_pair(merge)
        made = vocab.get(left + right)
        if made is None or left not in vocab or right not in vocab:
            return f"merge {left!r} {right!r} names a token outside the vocabulary"
        if made <= last or made <= vocab[left] or made <= vocab[right]:
            return f"merge {left!r} {right!r} is out of id order"
        last = made
    return None


def _unreachable(model: Any, vocab: dict[str, int], specials: set[str]) -> str | None:
    for token, rank in vocab.items():
        if token in specials:
            continue
        ids = [t.id for t in model.tokenize(token)]
        if ids != [rank]:
            return token
    return None


def tiktoken_twin(path: str, hf_tokenizer: Any) -> tuple[Any | None, str]:
    """``(tiktoken.Encoding, "")`` equivalent to the ``tokenizer.json`` at ``path`` (loaded
    as ``hf_tokenizer``), or ``(None, reason)``."""
    try:
        import tiktoken
    except ImportError:
        return None, "tiktoken is not installed"
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    problem = _structure_problem(spec) or _merge_problem(spec)
    if problem:
        return None, problem
    try:
        ranks = byte_level_ranks(spec)
    except ValueError as err:
        return None, str(err)
    specials = {t["content"]: t["id"] for t in spec.get("added_tokens", [])}
    token = _unreachable(hf_tokenizer.model, spec["model"]["vocab"], set(specials))
    if token is not None:
        return None, f"token {token!r} is not what its own bytes encode to"
    encoding = tiktoken.Encoding(name="curator-bpe", pat_str=GPT2_PATTERN,
                                 mergeable_ranks=ranks, special_tokens=specials)
    return encoding, ""
