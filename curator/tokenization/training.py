"""Train a byte-level BPE tokenizer with Hugging Face ``tokenizers``.

For users without a tokenizer, and for our own tests and demo (nothing can be downloaded here).
The vocabulary size is rounded up to a multiple of 128 (the trainer's
``--make-vocab-size-divisible-by`` default, and a multiple of 16 for FP8 GEMMs). If the corpus is
too small to learn that many merges, the rest is filled with ``<|reserved_N|>`` special tokens so
the size is still an exact multiple: ids stay stable and the embedding table needs no extra padding.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from curator.tokenization.tiktoken_twin import byte_level_ranks

__all__ = ["EOD_TOKEN", "export_tiktoken", "iter_texts", "round_vocab_size", "train_bpe"]

EOD_TOKEN = "<|endoftext|>"


def round_vocab_size(vocab_size: int, multiple: int = 128) -> int:
    if vocab_size <= 0:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    return -(-vocab_size // multiple) * multiple


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace")
    if path.suffix == ".zst":
        import zstandard  # optional

        return io.TextIOWrapper(
            zstandard.ZstdDecompressor().stream_reader(open(path, "rb")),
            encoding="utf-8",
            errors="replace",
        )
    return open(path, encoding="utf-8", errors="replace")


def iter_texts(paths: Iterable[str | os.PathLike[str]], text_field: str = "text") -> Iterator[str]:
    """Texts from plain files (one document per file), JSONL (``text_field`` per line) or
    Parquet (``text_field`` column); ``.gz``/``.zst`` accepted for text and JSONL."""
    for p in paths:
        p = Path(p)
        name = p.name.lower()
        stem = name[: -len(p.suffix)] if p.suffix in (".gz", ".zst") else name
        if stem.endswith(".parquet"):
            import pyarrow.parquet as pq

            for batch in pq.ParquetFile(p).iter_batches(columns=[text_field]):
                yield from (t for t in batch.column(0).to_pylist() if t)
        elif stem.endswith((".jsonl", ".json", ".ndjson")):
            with _open_text(p) as f:
                for line in f:
                    if line.strip():
                        t = json.loads(line).get(text_field)
                        if t:
                            yield t
        else:
            with _open_text(p) as f:
                yield f.read()


def train_bpe(
    vocab_size: int,
    *,
    texts: Iterable[str] | None = None,
    files: Sequence[str | os.PathLike[str]] | None = None,
    output: str | os.PathLike[str] | None = None,
    special_tokens: Sequence[str] = (EOD_TOKEN,),
    min_frequency: int = 2,
    text_field: str = "text",
    multiple: int = 128,
    show_progress: bool = False,
):
    """Train a byte-level BPE; returns a ``tokenizers.Tokenizer`` (and saves it if ``output``).

    Give ``texts`` (an iterable of strings, consumed once, streaming) or ``files`` (see
    :func:`iter_texts`), or both. ``output`` may be a ``.json`` file or a directory
    (``tokenizer.json`` is written inside). The EOD token ``<|endoftext|>`` gets id 0 unless
    ``special_tokens`` says otherwise.
    """
    import itertools

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    target = round_vocab_size(vocab_size, multiple)
    if texts is None and not files:
        raise ValueError("train_bpe needs texts= or files=")
    it: Iterable[str] = itertools.chain(texts or (), iter_texts(files or (), text_field))

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=target,
        min_frequency=min_frequency,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=show_progress,
    )
    tok.train_from_iterator(it, trainer=trainer)
    n = tok.get_vocab_size(with_added_tokens=True)
    if n < target:
        tok.add_special_tokens([f"<|reserved_{i}|>" for i in range(target - n)])
    assert tok.get_vocab_size(with_added_tokens=True) == target, (tok.get_vocab_size(), target)
    if output is not None:
        out = Path(output)
        if out.suffix != ".json":
            out.mkdir(parents=True, exist_ok=True)
            out = out / "tokenizer.json"
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tok.save(str(tmp))
        os.replace(tmp, out)
    return tok


def export_tiktoken(
    tokenizer_json: str | os.PathLike[str], output: str | os.PathLike[str]
) -> dict[str, int]:
    """Write a byte-level BPE ``tokenizer.json`` as a ``.tiktoken`` ranks file.

    Returns the special tokens (name -> id) to pass as ``special_tokens`` when loading it;
    load with ``pattern=GPT2_PATTERN`` to reproduce the ByteLevel pre-tokenisation.
    Ranks equal the Hugging Face ids, so both encodings name the same ids.
    """
    data = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
    if data["model"]["type"] != "BPE":
        raise ValueError(f"export_tiktoken needs a BPE model, got {data['model']['type']!r}")
    specials = {t["content"]: t["id"] for t in data.get("added_tokens", [])}
    ranks = sorted(byte_level_ranks(data).items(), key=lambda kv: kv[1])
    lines = [f"{base64.b64encode(raw).decode()} {idx}\n" for raw, idx in ranks]
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(lines), encoding="ascii")
    return specials
