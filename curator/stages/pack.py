"""``pack``: documents → Megatron-Bridge packed Parquet for fine-tuning.

Each document becomes one sequence: the tokens of ``prompt_field`` (when set), the tokens of
``text_field`` and the end-of-document token. The model is trained to predict the text's tokens
and the EOD, never the prompt's (the ``loss_mask``, label-aligned as Bridge reads it, see
:mod:`curator.formats.bridge`).
Sequences are packed first-fit-decreasing into packs of ``pack_size``,
Bridge's ``packed_sequence_size``: a sequence of L tokens takes L - 1 of it, as in Bridge's own
packer, so the trainer sees at most ``pack_size`` tokens a pack.

Packing is **per input shard**, not global. A shard's packs depend only on its documents in file
order, so a shard is a bounded-memory unit (its token ids, in one worker), packed in
the same task that reads and filters it, in parallel and without a barrier; a rerun of a cut
shard writes the same bytes and committed shards are never packed again. The price is the
first-fit-decreasing tail: a few partly filled packs per shard, next to nothing for shards of
thousands of documents (``packing_efficiency`` in the stats shows it when shards are too small).
Global packing would hold every sequence of the dataset behind a barrier for that gain. Bridge
reads a directory or glob of files as one dataset, so one file per shard is what it expects.

Every document is accounted for: a text that tokenizes to nothing is removed
(``empty_after_tokenization``); a sequence longer than a pack (more than ``pack_size`` + 1
tokens) is removed (``longer_than_pack_size``) or, with ``truncate``, cut to its first
``pack_size`` + 1 tokens, so without its EOD (the document does not end there); one whose prompt
alone fills a pack is removed even then (``prompt_longer_than_pack_size``: nothing of it would be
trained). A missing column or a null prompt fails the rows (``errors/``).

Output: ``<out>/part-NNNNN.idx.parquet`` per input shard with packs, committed with the shard,
and ``<out>/_pack_metadata.json``, Bridge's pack metadata (``pack_metadata_file_path``, needed for
``pad_cu_seqlens``). Give Bridge the directory (it reads every ``*.parquet`` in it).

``pack_size`` must be a multiple of 128, the FP8 rule for the trainer's sequence length
(:func:`curator.formats.fp8.check_seq_length`):
Bridge pads a packed batch to a multiple of 16 but never
past ``pack_size``, so a pack size that is not a multiple of 16 can give FP8 GEMMs a token count
they refuse.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, field_validator

from curator.batch import ID, BatchResult, Failure, split_by_reason
from curator.commit import write_json_atomic
from curator.formats.bridge import PackingStats, pack, write_packed_parquet
from curator.formats.fp8 import FP8ConfigError, check_seq_length
from curator.stages.base import ShardContext
from curator.stages.tokenizing import EMPTY_REASON, TokenizingSink
from curator.tokenization.loading import Tokenizer

LONG_REASON = "longer_than_pack_size"
PROMPT_REASON = "prompt_longer_than_pack_size"
METADATA = "_pack_metadata.json"  # "_": Arrow datasets skip it, Bridge reads only *.parquet


@dataclass(frozen=True)
class _Sequences:
    """Documents as token sequences back to back: prompt tokens first, then the trained ones."""

    tokens: np.ndarray  # int32
    lengths: np.ndarray  # int64, per document
    prompt_lengths: np.ndarray  # int64, per document
    cut: np.ndarray  # int64, per document: tokens truncation dropped

    def positions(self) -> np.ndarray:
        """Each token's position in its sequence."""
        starts = np.cumsum(self.lengths) - self.lengths
        return np.arange(len(self.tokens)) - np.repeat(starts, self.lengths)

    def token_mask(self) -> np.ndarray:
        """1 on the tokens the model learns to predict (all but the prompt's)."""
        return (self.positions() >= np.repeat(self.prompt_lengths, self.lengths)).astype(np.int8)

    def select(self, rows: np.ndarray) -> _Sequences:
        return _Sequences(self.tokens[np.repeat(rows, self.lengths)], self.lengths[rows],
                          self.prompt_lengths[rows], self.cut[rows])

    def truncated(self, limit: int) -> _Sequences:
        keep = self.positions() < limit
        return _Sequences(self.tokens[keep], np.minimum(self.lengths, limit), self.prompt_lengths,
                          self.cut + np.maximum(self.lengths - limit, 0))

    @staticmethod
    def concat(parts: list[_Sequences]) -> _Sequences:
        if not parts:
            empty = np.zeros(0, np.int64)
            return _Sequences(np.zeros(0, np.int32), empty, empty, empty)
        return _Sequences(*(np.concatenate([getattr(p, f) for p in parts])
                            for f in ("tokens", "lengths", "prompt_lengths", "cut")))


def _encode(tok: Tokenizer, prompts: list[str] | None, texts: list[str],
            eod: int | None) -> tuple[_Sequences, np.ndarray]:
    """Sequences ``prompt + text + EOD`` per document, and the text's token counts."""
    text_flat, text_lens = tok.encode_batch_flat(texts)
    if prompts is None:
        prompt_flat, prompt_lens = np.zeros(0, np.int32), np.zeros(len(texts), np.int64)
    else:
        prompt_flat, prompt_lens = tok.encode_batch_flat(prompts)
    lengths = prompt_lens + text_lens + (eod is not None)
    seqs = _Sequences(np.zeros(int(lengths.sum()), np.int32), lengths, prompt_lens,
                      np.zeros(len(texts), np.int64))
    k = seqs.positions()
    in_prompt = k < np.repeat(prompt_lens, lengths)
    in_text = ~in_prompt & (k < np.repeat(prompt_lens + text_lens, lengths))
    seqs.tokens[in_prompt] = prompt_flat  # both in document order, so a mask places them
    seqs.tokens[in_text] = text_flat
    if eod is not None:
        seqs.tokens[~in_prompt & ~in_text] = eod
    return seqs, text_lens


class Pack(TokenizingSink):
    """Pack (prompt, answer) documents into Megatron-Bridge packed Parquet for fine-tuning."""

    type = "pack"

    pack_size: int = Field(description="Tokens per pack as the trainer sees them (Bridge's "
                           "packed_sequence_size, its seq_length): a multiple of 128 (FP8).")
    path: str | None = Field(None, description="Output directory; default <output>/<stage name>.")
    text_field: str = Field("text", description="Column trained on (the answer). The source's "
                            "text_field is read into the column 'text'.")
    prompt_field: str | None = Field(None, description="Column of the prompt: its tokens come "
                                     "first and get no loss. Default: no prompt, loss on all.")
    append_eod: bool = Field(True, description="End every sequence with the end-of-document "
                             "token (trained: the model learns to stop).")
    truncate: bool = Field(False, description="Cut sequences longer than a pack to fit; "
                           "default: remove them (reason longer_than_pack_size).")

    # ------------------------------------------------------------------ validation
    @field_validator("pack_size")
    @classmethod
    def _check_pack_size(cls, value: int) -> int:
        try:
            return check_seq_length(value)
        except FP8ConfigError as err:
            raise ValueError(f"pack_size is the trainer's sequence length: {err}") from None

    # ------------------------------------------------------------------ per batch
    def process(self, batch: pa.Table) -> BatchResult:
        name = self.name or self.type
        error = self._column_error(batch)
        if error:
            return BatchResult(kept=batch.slice(0, 0), failed=[
                Failure(stage=name, error=error, id=i) for i in batch.column(ID).to_pylist()])
        failed = []
        if self.prompt_field:
            null = pc.is_null(batch.column(self.prompt_field))
            if pc.any(null).as_py():
                error = f"field {self.prompt_field!r} (prompt_field) is null"
                failed = [Failure(stage=name, error=error, id=i)
                          for i in batch.filter(null).column(ID).to_pylist()]
                batch = batch.filter(pc.invert(null))
        seqs, reasons = self._sequences(batch)
        result = split_by_reason(batch, pa.array(reasons, pa.string()))
        result.failed = failed
        seqs = seqs.select(np.array([r is None for r in reasons], dtype=bool))
        result.payload = seqs
        return result

    def join_payloads(self, payloads: list[_Sequences]) -> _Sequences:
        return _Sequences.concat(payloads)

    def _column_error(self, batch: pa.Table) -> str | None:
        for param, column in (("text_field", self.text_field),
                              ("prompt_field", self.prompt_field)):
            if column is None:
                continue
            if column not in batch.column_names:
                return (f"no column {column!r} ({param}) in the batch; columns: "
                        f"{batch.column_names} (the source's text_field is read into 'text')")
            kind = batch.column(column).type
            if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
                return f"column {column!r} ({param}) is {kind}, expected strings"
        return None

    def _sequences(self, batch: pa.Table) -> tuple[_Sequences, list[str | None]]:
        """The sequence of every row (truncated when asked) and why a row goes (None: kept)."""
        texts = ["" if t is None else t for t in batch.column(self.text_field).to_pylist()]
        prompts = batch.column(self.prompt_field).to_pylist() if self.prompt_field else None
        tok = self._tokenizer()
        seqs, text_lengths = _encode(tok, prompts, texts, tok.eod_id if self.append_eod else None)
        limit = self.pack_size + 1
        too_long = seqs.lengths > limit
        if self.truncate:
            reasons = np.where(too_long & (seqs.prompt_lengths > self.pack_size), PROMPT_REASON,
                               None)
            seqs = seqs.truncated(limit)
        else:
            reasons = np.where(too_long, LONG_REASON, None)
        reasons[text_lengths == 0] = EMPTY_REASON
        return seqs, reasons.tolist()

    def open(self, ctx: ShardContext) -> _PackWriter:
        return _PackWriter(self, ctx)

    # ------------------------------------------------------------------ after all shards
    def dataset_files(self, run_dir: Path, stage_name: str) -> list[Path]:
        return [self.output_dir(run_dir, stage_name) / METADATA]

    def finalize(self, run_dir: Path, stage_name: str,
                 shard_infos: list[dict[str, Any]]) -> dict[str, Any]:
        out = self.output_dir(run_dir, stage_name)
        self.check_one_tokenizer(out, shard_infos)
        stats = functools.reduce(PackingStats.merge,
                                 (PackingStats(**i["stats"]) for i in shard_infos),
                                 PackingStats(self.pack_size))
        result: dict[str, Any] = {
            "output": str(out.resolve()),
            "files": sum(i["file"] is not None for i in shard_infos),
            "pack_size": self.pack_size,
            "packs": stats.num_packs,
            "sequences": stats.num_sequences,
            "tokens": stats.num_tokens,
            "loss_tokens": stats.num_loss_tokens,
            "truncated": sum(i["truncated"] for i in shard_infos),
            "truncated_tokens": sum(i["truncated_tokens"] for i in shard_infos),
            "packing_factor": round(stats.packing_factor, 4),
            "packing_efficiency": round(stats.packing_efficiency, 4),
            "max_sequence_length": stats.max_sequence_length,
            "max_sequences_per_pack": stats.max_sequences_per_pack,
            "warnings": [],
        }
        if stats.num_packs:
            write_json_atomic(out / METADATA, [stats.bridge_metadata()])
            result["metadata"] = str((out / METADATA).resolve())
        else:
            result["warnings"].append("no packs were written")
        for tmp in out.glob(".part-*.idx.parquet.*.tmp"):  # left by a killed shard
            tmp.unlink(missing_ok=True)
        return result


class _PackWriter:
    """One input shard's sequences, packed and written when the shard is whole."""

    def __init__(self, stage: Pack, ctx: ShardContext) -> None:
        self.stage, self.ctx = stage, ctx
        self.parts: list[_Sequences] = []

    def write(self, table: pa.Table, payload: _Sequences) -> list[Failure]:
        if table.num_rows:
            self.parts.append(payload)
        return []

    def close(self) -> dict[str, Any]:
        seqs = _Sequences.concat(self.parts)
        self.parts.clear()
        packs, stats = pack(seqs.tokens, seqs.lengths, self.stage.pack_size, seqs.token_mask())
        file = None
        if len(packs):
            out = self.stage.output_dir(self.ctx.run_dir, self.ctx.stage_name)
            final = out / f"{self.ctx.shard.part}.idx.parquet"
            write_packed_parquet(packs, self.ctx.temporary_for(final))
            file = final.name
        return {"part": self.ctx.shard.part, "file": file, "stats": stats.to_dict(),
                "truncated": int((seqs.cut > 0).sum()), "truncated_tokens": int(seqs.cut.sum()),
                "tokenizer_hash": self.stage._tok_hash}
