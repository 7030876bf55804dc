"""Shared base of the sinks that tokenize (``tokenize``, ``pack``).

Tokenizing happens in ``process`` (so a document that tokenizes to nothing, or too long, is
*removed* with its reason and shows in the funnel); what ``process`` computed for the kept rows
is handed to the shard's writer through a per-thread queue (:meth:`hand_over` /
:meth:`take_over`), so nothing is encoded twice and the documents pass on unchanged.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
from pydantic import Field, PrivateAttr, field_validator

from curator.batch import ID
from curator.commit import checksum
from curator.stages.base import Sink
from curator.tokenization.loading import Tokenizer, TokenizerSpecError, load_tokenizer

EMPTY_REASON = "empty_after_tokenization"
T = TypeVar("T")
_HANDOFF = threading.local()  # per thread: stage id -> deque of (ids, payload, rows)
_LIBRARY = {"hf": "tokenizers", "sentencepiece": "sentencepiece", "tiktoken": "tiktoken"}


class TokenizingSink(Sink):
    """A sink that loads a tokenizer once per worker and hands tokens from process to writer."""

    tokenizer: str | dict[str, Any] = Field(
        description="tokenizer.json, a model directory, a SentencePiece .model or a .tiktoken "
        "file; or a mapping {path, type, eod_token, pattern, special_tokens, encoder}.")
    append_eod: bool = Field(True, description="End every document with the end-of-document "
                             "token.")

    _tok: Tokenizer | None = PrivateAttr(None)
    _tok_hash: str | None = PrivateAttr(None)

    @field_validator("tokenizer")
    @classmethod
    def _check_tokenizer(cls, value: str | dict[str, Any]) -> str | dict[str, Any]:
        try:
            load_tokenizer(value)  # checks the path and the kind; loads nothing
        except TokenizerSpecError as err:
            raise ValueError(str(err)) from None
        return value

    def requirements(self) -> dict[str, str]:
        """The library that reads this kind of tokenizer file (from the tokenize extra)."""
        return {_LIBRARY[load_tokenizer(self.tokenizer).kind]: "tokenize"}

    def setup(self) -> None:
        tok = load_tokenizer(self.tokenizer)
        tok._load()
        if self.append_eod:
            _ = tok.eod_id  # a tokenizer without an end-of-document token fails here, once
        self._tok = tok
        self._tok_hash = checksum(Path(tok.path))

    def _tokenizer(self) -> Tokenizer:
        if self._tok is None:
            self.setup()
        assert self._tok is not None
        return self._tok

    # ------------------------------------------------------------------ process -> writer
    def _queue(self) -> deque:
        queues = getattr(_HANDOFF, "queues", None)
        if queues is None:
            queues = _HANDOFF.queues = {}
        return queues.setdefault(id(self), deque())

    def hand_over(self, ids: pa.Array | pa.ChunkedArray, payload: Any, rows: int) -> None:
        """Keep what ``process`` computed for the kept rows ``ids`` for the shard's writer."""
        if rows:
            self._queue().append((ids, payload, rows))

    def take_over(self, table: pa.Table, join: Callable[[list[Any]], T],
                  rebuild: Callable[[pa.Table], T]) -> T:
        """What ``process`` handed over for exactly the rows of ``table`` (``join`` of the
        payloads), or ``rebuild(table)`` when the queue is out of step (a caller that skipped
        ``process``)."""
        queue = self._queue()
        parts, rows = [], 0
        while queue and rows < table.num_rows:
            parts.append(queue.popleft())
            rows += parts[-1][2]
        if parts and rows == table.num_rows:
            ids = pa.chunked_array([c.cast(pa.string()) for p in parts
                                    for c in pa.chunked_array(p[0]).chunks], pa.string())
            if ids.equals(table.column(ID).cast(pa.string())):
                return join([p[1] for p in parts])
        queue.clear()
        return rebuild(table)

    # ------------------------------------------------------------------ finalize
    def check_one_tokenizer(self, out: Path, shard_infos: list[dict[str, Any]]) -> None:
        """Refuse shards written by different tokenizer files (the file changed between runs)."""
        hashes = sorted({i["tokenizer_hash"] for i in shard_infos if i.get("tokenizer_hash")})
        if len(hashes) > 1:
            raise ValueError(
                f"the shards under {out} were tokenized by different tokenizer files "
                f"({', '.join(hashes)}): the tokenizer at {self.tokenizer!r} changed between "
                "runs; rerun with --force (or another --output) to tokenize everything again")
