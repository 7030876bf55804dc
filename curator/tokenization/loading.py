"""One interface over the tokenizer formats a trainer may use.

``load_tokenizer(spec)`` accepts

* a Hugging Face ``tokenizer.json`` file, or a local model directory holding one;
* a SentencePiece ``.model`` file, or a directory holding ``tokenizer.model``;
* a tiktoken ``.tiktoken`` ranks file (base64 token, rank per line), or a directory holding one;
* a mapping ``{"path": ..., "type": "hf"|"sentencepiece"|"tiktoken", "eod_token": ...,
  "pattern": ..., "special_tokens": {...}, "encoder": "auto"|"native"}`` when the defaults
  need overriding.

A byte-level BPE ``tokenizer.json`` is encoded by its exact tiktoken twin when one exists
(``curator.tokenization.tiktoken_twin``; several times faster per core),
checked against the ``tokenizers``
library on the first slice each process encodes; ``encoder: native`` turns the twin off.

The returned :class:`Tokenizer` loads the underlying library object lazily, on first use, and
drops it when pickled, so it travels to Dask workers as a few strings and is loaded once per
worker process (the cc_net "prepare lazily on the worker" pattern).

``encode_batch`` never adds BOS/EOS: the end-of-document token is the writer's business
(:mod:`curator.formats.megatron`), so that "empty document" can be told apart from "document of one
EOD token".
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from curator.tokenization.tiktoken_twin import GPT2_PATTERN, tiktoken_twin

_log = logging.getLogger(__name__)

__all__ = ["CL100K_PATTERN", "GPT2_PATTERN", "Tokenizer", "TokenizerSpecError", "load_tokenizer"]

# Pre-tokenisation regexes for tiktoken files (a .tiktoken file holds ranks only); GPT2_PATTERN
# (curator.tokenization.tiktoken_twin) is the split of Hugging Face's ByteLevel pre-tokenizer.
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|"""
    r"""\s*[\r\n]|\s+(?!\S)|\s+"""
)

# Characters per native encode call in encode_batch / encode_batch_flat: bounds the memory the
# library's per-token objects take at once, whatever the caller's batch holds (benchmarks/
# bench_tokenize.py: peak RSS 173 -> 100 MB at 512 documents a batch), while each call still holds
# enough work (~0.1 s) to keep the native threads busy.
ENCODE_CHUNK_CHARS = 1 << 18

# Candidates for the end-of-document token, in order of preference.
EOD_CANDIDATES = (
    "<|endoftext|>",
    "<|end_of_text|>",
    "</s>",
    "<eos>",
    "<|eos|>",
    "[EOS]",
    "<|im_end|>",
)

KINDS = ("hf", "sentencepiece", "tiktoken")


class TokenizerSpecError(ValueError):
    """The tokenizer spec does not name a usable tokenizer."""


def _detect(path: Path) -> tuple[str, Path]:
    if path.is_dir():
        if (path / "tokenizer.json").is_file():
            return "hf", path / "tokenizer.json"
        if (path / "tokenizer.model").is_file():
            return "sentencepiece", path / "tokenizer.model"
        tk = sorted(path.glob("*.tiktoken"))
        if len(tk) == 1:
            return "tiktoken", tk[0]
        models = sorted(path.glob("*.model"))
        if len(models) == 1:
            return "sentencepiece", models[0]
        raise TokenizerSpecError(
            f"tokenizer directory {str(path)!r} holds no tokenizer.json, tokenizer.model, "
            "single *.tiktoken or single *.model file; "
            f"found {sorted(p.name for p in path.iterdir())[:10]}"
        )
    if not path.exists():
        raise TokenizerSpecError(f"tokenizer path {str(path)!r} does not exist")
    name = path.name.lower()
    if name.endswith(".json"):
        return "hf", path
    if name.endswith(".model"):
        return "sentencepiece", path
    if name.endswith(".tiktoken"):
        return "tiktoken", path
    raise TokenizerSpecError(
        f"cannot tell the tokenizer type of {str(path)!r}: expected a tokenizer.json, "
        "a SentencePiece .model, a .tiktoken file, or a directory holding one; "
        "pass {'type': ...} to force it"
    )


@dataclass
class Tokenizer:
    """A lazily loaded, picklable tokenizer. Build it with :func:`load_tokenizer`."""

    path: str
    kind: str
    eod_token: str | None = None
    pattern: str | None = None  # tiktoken only
    special_tokens: dict[str, int] = field(default_factory=dict)  # tiktoken only
    num_threads: int | None = None  # None: the library's default (all cores)
    encoder: str = "auto"  # hf only: "auto" runs an exact tiktoken twin when there is one
    _obj: Any = field(default=None, init=False, repr=False, compare=False)
    _twin: Any = field(default=None, init=False, repr=False, compare=False)
    _twin_checked: bool = field(default=False, init=False, repr=False, compare=False)
    encoder_note: str = field(default="", init=False, repr=False, compare=False)
    _vocab_size: int | None = field(default=None, init=False, repr=False, compare=False)
    _eod_id: int | None = field(default=None, init=False, repr=False, compare=False)

    # -- pickling: ship the spec, never the loaded object ---------------------------------------
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_obj"] = state["_twin"] = None
        state["_twin_checked"] = False
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    # -- loading ---------------------------------------------------------------------------------
    def _load(self) -> Any:
        if self._obj is not None:
            return self._obj
        if self.kind == "hf":
            from tokenizers import Tokenizer as HFTokenizer

            obj = HFTokenizer.from_file(self.path)
            # Text that spells a special token ("<|endoftext|>" in a web page) is encoded as plain
            # text, as tiktoken's encode_ordinary does; only the writer emits the real EOD id.
            obj.encode_special_tokens = True
            vocab = obj.get_vocab(with_added_tokens=True)
            self._vocab_size = max(vocab.values()) + 1
            eod = self._pick_eod(lambda t: vocab.get(t))
            self._load_twin(obj)
        elif self.kind == "sentencepiece":
            import sentencepiece as spm

            obj = spm.SentencePieceProcessor(model_file=self.path)
            self._vocab_size = obj.get_piece_size()

            def sp_lookup(t: str) -> int | None:
                i = obj.piece_to_id(t)
                return None if i == obj.unk_id() and t != obj.id_to_piece(obj.unk_id()) else i

            eod = self._pick_eod(sp_lookup)
            self.encoder_note = "sentencepiece"
            if eod is None and obj.eos_id() >= 0:
                eod = obj.eos_id()
        elif self.kind == "tiktoken":
            import tiktoken
            from tiktoken.load import load_tiktoken_bpe

            ranks = load_tiktoken_bpe(self.path)
            specials = dict(self.special_tokens)
            if not specials:
                specials = {"<|endoftext|>": max(ranks.values()) + 1}
            obj = tiktoken.Encoding(
                name=Path(self.path).stem,
                pat_str=self.pattern or CL100K_PATTERN,
                mergeable_ranks=ranks,
                special_tokens=specials,
            )
            self._vocab_size = max(max(ranks.values()), max(specials.values())) + 1
            eod = self._pick_eod(lambda t: specials.get(t))
            self.encoder_note = "tiktoken"
        else:  # pragma: no cover - guarded by load_tokenizer
            raise TokenizerSpecError(f"unknown tokenizer kind {self.kind!r}")
        self._eod_id = None if eod is None else int(eod)
        self._obj = obj
        return obj

    def _load_twin(self, hf: Any) -> None:
        """Find the tiktoken twin of a byte-level BPE (``tiktoken_twin``), if asked."""
        if self.encoder == "native":
            self.encoder_note = "tokenizers (native, as configured)"
            return
        self._twin, why = tiktoken_twin(self.path, hf)
        self.encoder_note = ("tiktoken twin of tokenizer.json" if self._twin is not None
                             else f"tokenizers (no tiktoken twin: {why})")

    def _pick_eod(self, lookup) -> int | None:
        if self.eod_token is not None:
            i = lookup(self.eod_token)
            if i is None:
                raise TokenizerSpecError(
                    f"eod_token {self.eod_token!r} is not in the vocabulary of {self.path!r}"
                )
            return i
        for cand in EOD_CANDIDATES:
            i = lookup(cand)
            if i is not None:
                return i
        return None

    # -- public surface ----------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        """Largest token id + 1 (what the ``.bin`` dtype and the range check must cover)."""
        self._load()
        assert self._vocab_size is not None
        return self._vocab_size

    @property
    def eod_id(self) -> int:
        """The end-of-document id; raises when the vocabulary has none (set ``eod_token``)."""
        self._load()
        if self._eod_id is None:
            raise TokenizerSpecError(
                f"no end-of-document token found in {self.path!r}: looked for "
                f"{[self.eod_token] if self.eod_token else list(EOD_CANDIDATES)}; set eod_token"
            )
        return self._eod_id

    def encode_batch(
        self, texts: Sequence[str], *, max_chars: int = ENCODE_CHUNK_CHARS
    ) -> list[list[int]]:
        """Token ids per text, no special tokens added."""
        flat, lengths = self.encode_batch_flat(texts, max_chars=max_chars)
        return [part.tolist() for part in np.split(flat, np.cumsum(lengths)[:-1])] if len(
            lengths) else []

    def encode_batch_flat(
        self, texts: Sequence[str], *, max_chars: int = ENCODE_CHUNK_CHARS
    ) -> tuple[np.ndarray, np.ndarray]:
        """Token ids of ``texts`` as one flat ``int32`` array and per-text lengths (``int64``).

        Each slice of about ``max_chars`` characters is turned into NumPy before the next one is
        encoded, so the library's per-token objects (Hugging Face ``Encoding``: ids, token
        strings, offsets, masks, ~80 bytes a token) and the Python int lists exist for one slice
        at a time: the transient memory is bounded by ``max_chars``, not by how many bytes the
        caller's batch happens to hold.
        """
        texts = texts if isinstance(texts, list) else list(texts)
        flats: list[np.ndarray] = []
        lens: list[np.ndarray] = []
        for part in self._slices(texts, max_chars):
            flat, lengths = self._encode_flat(part)
            flats.append(flat)
            lens.append(lengths)
        if not lens:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64)
        if len(lens) == 1:
            return flats[0], lens[0]
        return np.concatenate(flats), np.concatenate(lens)

    @staticmethod
    def _slices(texts: list[str], max_chars: int) -> Iterator[list[str]]:
        """Consecutive slices of ``texts`` of about ``max_chars`` characters each (a longer text
        is a slice of its own)."""
        i, n = 0, len(texts)
        while i < n:
            j, size = i + 1, len(texts[i])
            while j < n and size + len(texts[j]) <= max_chars:
                size += len(texts[j])
                j += 1
            yield texts[i:j] if (i, j) != (0, n) else texts
            i = j

    def _encode_flat(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        obj = self._load()
        if self.kind == "tiktoken":
            return _tiktoken_flat(obj, texts)
        if self.kind == "hf" and self._twin is not None:
            return self._encode_twin(obj, texts)
        if self.kind == "hf":
            return _lists_flat(_hf_ids(obj, texts))
        threads = self.num_threads or os.cpu_count() or 1
        return _lists_flat(obj.encode(texts, out_type=int, num_threads=threads))

    def _encode_twin(self, hf: Any, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Encode with the tiktoken twin; its first slice in each process is also encoded
        natively, and any difference retires the twin for good (with a warning)."""
        flat, lengths = _tiktoken_flat(self._twin, texts)
        if self._twin_checked:
            return flat, lengths
        native, native_lengths = _lists_flat(_hf_ids(hf, texts))
        self._twin_checked = True
        if np.array_equal(lengths, native_lengths) and np.array_equal(flat, native):
            return flat, lengths
        self._twin = None
        self.encoder_note = "tokenizers (its tiktoken twin differed on real text)"
        _log.warning("%s: the tiktoken twin encodes some text differently; using tokenizers",
                     self.path)
        return native, native_lengths

    def encode(self, text: str) -> list[int]:
        return self.encode_batch([text])[0]

    def decode(self, ids: Sequence[int]) -> str:
        obj = self._load()
        ids = [int(i) for i in ids]
        if self.kind == "hf":
            return obj.decode(ids, skip_special_tokens=False)
        if self.kind == "sentencepiece":
            return obj.decode(ids)
        return obj.decode(ids)


def _hf_ids(hf: Any, texts: list[str]) -> list[list[int]]:
    """``tokenizers`` ids; encode_batch_fast skips offset tracking and fans out over the
    library's own thread pool."""
    enc = getattr(hf, "encode_batch_fast", hf.encode_batch)
    return [e.ids for e in enc(texts, add_special_tokens=False)]


def _lists_flat(ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(chain.from_iterable(ids), dtype=np.int32, count=int(lengths.sum()))
    return flat, lengths


def _tiktoken_flat(encoding: Any, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """tiktoken ids without Python int lists. Special-token text is encoded as plain text
    (nothing allowed, nothing refused), as ``encode_ordinary`` does. One text after another:
    tiktoken's encoder holds the GIL, so threads would only contend; the runtime runs stages
    that hold the GIL in one process per core."""
    parts = [encoding.encode_to_numpy(t, disallowed_special=()) for t in texts]
    lengths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    flat = np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)
    return flat, lengths


def load_tokenizer(spec: str | os.PathLike[str] | Mapping[str, Any] | Tokenizer) -> Tokenizer:
    """Describe a tokenizer from a path or a mapping; nothing heavy is loaded until first use.

    The path is checked now (a missing file fails at config time, not on a worker)."""
    if isinstance(spec, Tokenizer):
        return spec
    if isinstance(spec, (str, os.PathLike)):
        spec = {"path": os.fspath(spec)}
    if not isinstance(spec, Mapping) or "path" not in spec:
        raise TokenizerSpecError(
            f"tokenizer spec must be a path or a mapping with 'path'; got {spec!r}"
        )
    unknown = set(spec) - {"path", "type", "eod_token", "pattern", "special_tokens", "num_threads",
                           "encoder"}
    if unknown:
        raise TokenizerSpecError(f"unknown tokenizer option(s) {sorted(unknown)}")
    path = Path(os.path.expanduser(str(spec["path"])))
    kind = spec.get("type")
    if kind is None:
        kind, path = _detect(path)
    else:
        aliases = {
            "huggingface": "hf",
            "hf": "hf",
            "sp": "sentencepiece",
            "sentencepiece": "sentencepiece",
            "tiktoken": "tiktoken",
        }
        if kind not in aliases:
            raise TokenizerSpecError(f"tokenizer type {kind!r} is not one of {sorted(aliases)}")
        kind = aliases[kind]
        if path.is_dir():
            _, path = _detect(path)
        elif not path.exists():
            raise TokenizerSpecError(f"tokenizer path {str(path)!r} does not exist")
    return Tokenizer(
        path=str(path.resolve()),
        kind=kind,
        eod_token=spec.get("eod_token"),
        pattern=spec.get("pattern"),
        special_tokens=dict(spec.get("special_tokens") or {}),
        num_threads=spec.get("num_threads"),
        encoder=_check_encoder(spec.get("encoder", "auto")),
    )


def _check_encoder(encoder: str) -> str:
    if encoder not in ("auto", "native"):
        raise TokenizerSpecError(f"encoder {encoder!r} is not 'auto' or 'native'")
    return encoder
