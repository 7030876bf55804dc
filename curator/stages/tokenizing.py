"""Shared base of the sinks that tokenize (``tokenize``, ``pack``).

Tokenizing happens in ``process`` (so a document that tokenizes to nothing, or too long, is
*removed* with its reason and shows in the funnel); what ``process`` computed for the kept rows
travels to the shard's writer as the result's ``payload``, so nothing is encoded twice and the
documents pass on unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr, field_validator

from curator.commit import checksum
from curator.stages.base import Sink
from curator.tokenization.loading import Tokenizer, TokenizerSpecError, load_tokenizer

EMPTY_REASON = "empty_after_tokenization"
_LIBRARY = {"hf": "tokenizers", "sentencepiece": "sentencepiece", "tiktoken": "tiktoken"}


class TokenizingSink(Sink):
    """A sink that loads a tokenizer once per worker; its writer gets the tokens with the rows."""

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

    def side_inputs(self) -> list[str]:
        return [str(load_tokenizer(self.tokenizer).path)]

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

    # ------------------------------------------------------------------ finalize
    def check_one_tokenizer(self, out: Path, shard_infos: list[dict[str, Any]]) -> None:
        """Refuse shards written by different tokenizer files (the file changed between runs)."""
        hashes = sorted({i["tokenizer_hash"] for i in shard_infos if i.get("tokenizer_hash")})
        if len(hashes) > 1:
            raise ValueError(
                f"the shards under {out} were tokenized by different tokenizer files "
                f"({', '.join(hashes)}): the tokenizer at {self.tokenizer!r} changed between "
                "runs; rerun with --force (or another --output) to tokenize everything again")
