"""``tokenize``: documents → Megatron-Core indexed datasets, a blend file and token counts.

Per input shard, per source and split, the stage writes
``<out>/<name>[_<source>][_<split>]_<shard:05d>_<piece:05d>_text_document.{bin,idx}`` (a new
piece when ``max_shard_tokens`` / ``max_shard_bytes`` is reached), committed with the shard by
the runtime (temporary names, renamed when the shard is whole, manifest last). After every shard
it writes ``<out>/blend.json`` (relative weights per source, the ``--data-path`` / NeMo 2
``paths=`` strings to paste) and ``<out>/per_dataset_sequences.json``, and reports tokens and
documents per source and split, the vocabulary and the padded vocabulary the trainer will use.

A document that tokenizes to nothing is *removed* (``empty_after_tokenization``) in ``process``,
which hands the kept rows' tokens to the shard's writer as the result's payload.

Sources: with ``source_field`` unset, a pipeline that reads several sources gets one blend entry
per source, as with ``source_field: source``. The stage learns its sources from the shards: the
runtime names the source stage that listed each shard (``ShardContext.shard.source``), so each
shard's files belong to one source (named by the ``source`` column its rows carry, the most
common value) and ``finalize`` groups them per source when the shards came from more than one
source stage; with one source stage it is one entry, named ``dataset_name``, as before. The file
names do not depend on it (``<name>[_<split>]_<shard>_<piece>``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pyarrow as pa
import xxhash
from pydantic import Field, field_validator, model_validator

from curator.batch import ID, REASON, SOURCE, TEXT, BatchResult, Failure, id_fractions
from curator.formats.blend import Blend
from curator.formats.fp8 import FP8ConfigError, check_seq_length, vocab_report
from curator.formats.megatron import ShardedIndexedDatasetWriter, ShardInfo, TokenOutOfVocabError
from curator.stages.base import ShardContext
from curator.stages.tokenizing import EMPTY_REASON, TokenizingSink
from curator.tokenization.loading import Tokenizer

SPLITS = ("train", "valid", "test")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str) -> str:
    """A file-name-safe spelling of ``name``; a hash keeps two different names apart."""
    cleaned = _SAFE.sub("_", name).strip("._") or "source"
    if cleaned == name:
        return name
    return f"{cleaned}-{xxhash.xxh32_hexdigest(name.encode())}"


def split_of(ids: list[str], fractions: dict[str, float], seed: int) -> np.ndarray:
    """Index into ``SPLITS`` per id, from a seeded 64-bit hash of the id (deterministic)."""
    bounds = np.cumsum([fractions.get(s, 0.0) for s in SPLITS])
    bounds[-1] = np.inf  # rounding never sends a document past "test"
    u = id_fractions([str(i) for i in ids], seed)
    return np.searchsorted(bounds, u, side="right").astype(np.int8)


class Tokenize(TokenizingSink):
    """Tokenize documents into Megatron-Core ``.bin/.idx`` shards with a blend file."""

    type = "tokenize"
    reporting: ClassVar[frozenset[str]] = frozenset({"train_tokens", "max_epochs"})

    path: str | None = Field(None, description="Output directory; default <output>/tokens.")
    dataset_name: str | None = Field(
        None, description="File name prefix and default source name; default the stage name.")
    keep_empty: bool = Field(False, description="Keep documents that tokenize to nothing (as a "
                             "lone EOD); default: remove them (reason empty_after_tokenization).")
    max_shard_tokens: int | None = Field(None, gt=0, description="Start a new .bin/.idx piece "
                                         "before this many tokens.")
    max_shard_bytes: int | None = Field(None, gt=0, description="Start a new piece before this "
                                        "many .bin bytes.")
    seq_length: int | None = Field(None, description="The trainer's sequence length: must be a "
                                   "multiple of 128 (FP8); used for sample counts and warnings.")
    tensor_parallel_size: int = Field(1, gt=0, description="Tensor-parallel size, for the padded "
                                      "vocabulary size in the stats.")
    source_field: str | None = Field(
        None, description="Column naming each document's source (one blend entry per value, "
        "e.g. source or lang). Default: one entry per source when the pipeline reads several "
        "(its source stages; named by the source column), one entry otherwise; '' for one "
        "entry whatever the sources.")
    group_by: list[str] | None = Field(
        None, min_length=1, description="Columns whose values together name each document's "
        "blend entry, joined by '/' (e.g. [lang, quality] → 'ja/high'; a null value reads "
        "'none'): one entry per combination present. Not with source_field.")
    weights: dict[str, float] | None = Field(None, description="Relative weight per source; "
                                             "default: the natural mix (token counts).")
    repeats: dict[str, float] | None = Field(
        None, description="Repeat factor per source (blend entry): its weight is its tokens "
        "times the factor, 1 for an entry not named (Nemotron-CC repeats its high-quality "
        "levels); train_tokens then defaults to the repeated blend's tokens, so an entry's "
        "epochs are its factor. Not with weights.")
    repeat_field: str | None = Field(
        None, description="Column with the times each document is written (rehydrate's "
        "repeats): its tokens go into the .bin that many times in a row; a null reads 1, 0 "
        "writes it not at all (the row stays in the stage's output).")
    split: dict[Literal["train", "valid", "test"], float] | None = Field(
        None, description="Fractions per split, e.g. {train: 0.98, valid: 0.01, test: 0.01}; "
        "assigned by a seeded hash of the document id.")
    train_tokens: int | None = Field(None, gt=0, description="Tokens the model will train on, "
                                     "for each source's epochs (weight share * train_tokens / "
                                     "its train tokens); default: the blend's train tokens.")
    max_epochs: float = Field(4.0, gt=0, description="A source repeated more often than this "
                              "gets a warning (about 4 epochs of repeated data train nearly as "
                              "well as unique data: Muennighoff et al., 2023).")
    seed: int = Field(0, ge=0, description="Seed of the split hash and of the shuffle.")
    shuffle: bool = Field(False, description="Seeded shuffle of the document order in each "
                          "written piece (its .idx); default: input order.")

    # ------------------------------------------------------------------ validation
    @field_validator("seq_length")
    @classmethod
    def _check_seq_length(cls, value: int | None) -> int | None:
        if value is None:
            return value
        try:
            return check_seq_length(value)
        except FP8ConfigError as err:
            raise ValueError(str(err)) from None

    @field_validator("dataset_name")
    @classmethod
    def _check_name(cls, value: str | None) -> str | None:
        if value is not None and safe_name(value) != value:
            raise ValueError(f"dataset_name {value!r} must use only letters, digits, '.', '_' "
                             f"and '-' (it names files); e.g. {_SAFE.sub('_', value)!r}")
        return value

    @field_validator("weights")
    @classmethod
    def _check_weights(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        if value is None:
            return value
        bad = {k: w for k, w in value.items() if not math.isfinite(w) or w < 0}
        if bad:
            raise ValueError(f"weights must be finite and non-negative; got {bad}")
        if not any(w > 0 for w in value.values()):
            raise ValueError("at least one source needs a positive weight")
        return value

    @field_validator("repeats")
    @classmethod
    def _check_repeats(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        if value is not None and any(not math.isfinite(r) or r < 0 for r in value.values()):
            raise ValueError(f"repeats must be finite and non-negative; got {value}")
        return value

    @model_validator(mode="after")
    def _one_way_to_name_and_weigh(self) -> Tokenize:
        if self.group_by and self.source_field is not None:
            raise ValueError("source_field and group_by both name blend entries: give one")
        if self.repeats is not None and self.weights is not None:
            raise ValueError("weights and repeats both weigh blend entries: give one")
        return self

    def entry_columns(self) -> list[str]:
        """The columns naming each document's blend entry (source_field or group_by)."""
        return list(self.group_by or ([self.source_field] if self.source_field else []))

    def entry_names(self, table: pa.Table, default: str) -> list[str]:
        """Each row's blend entry: ``default`` without source_field and group_by."""
        columns = self.entry_columns()
        if not columns:
            return [default] * table.num_rows
        if self.group_by:
            values = zip(*(table.column(c).to_pylist() for c in columns), strict=True)
            return ["/".join("none" if v is None or v == "" else str(v) for v in row)
                    for row in values]
        raw = table.column(columns[0]).to_pylist()
        return [default if v is None or v == "" else str(v) for v in raw]

    def entry_weight(self, entry: str, tokens: int) -> float | None:
        """An entry's blend weight: from weights, from repeats (tokens x factor), or None (the
        natural mix) — 0 or None from weights leaves it out."""
        if self.repeats is not None:
            return tokens * self.repeats.get(entry, 1.0)
        return None if self.weights is None else self.weights.get(entry)

    @field_validator("split")
    @classmethod
    def _check_split(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        if value is None:
            return value
        if any(not 0 <= f <= 1 for f in value.values()):
            raise ValueError(f"split fractions must lie in [0, 1]; got {value}")
        if abs(sum(value.values()) - 1) > 1e-6:
            raise ValueError(f"split fractions must sum to 1; got {value} "
                             f"(sum {sum(value.values()):g})")
        return value

    def output_dir(self, run_dir: Path, stage_name: str) -> Path:
        return Path(self.path) if self.path else Path(run_dir) / "tokens"

    def base_name(self, stage_name: str) -> str:
        return self.dataset_name or safe_name(stage_name)

    # ------------------------------------------------------------------ per batch
    def process(self, batch: pa.Table) -> BatchResult:
        absent = [c for c in [*self.entry_columns(), *([self.repeat_field] if self.repeat_field
                                                        else [])]
                  if c not in batch.column_names]
        if absent:
            which = ("repeat_field" if absent[0] == self.repeat_field
                     else "group_by" if self.group_by else "source_field")
            error = (f"no column {absent[0]!r} ({which}) in the batch; columns: "
                     f"{batch.column_names}")
            return BatchResult(kept=batch.slice(0, 0), failed=[
                Failure(stage=self.name or self.type, error=error, id=i)
                for i in batch.column(ID).to_pylist()])
        flat, lengths = _encode(self._tokenizer(), batch.column(TEXT).to_pylist())
        empty = lengths == 0
        if self.keep_empty or not empty.any():
            kept, removed = batch, None
        else:
            mask = pa.array(~empty)
            kept = batch.filter(mask)
            gone = batch.filter(pa.array(empty))
            removed = gone.append_column(REASON, pa.array([EMPTY_REASON] * gone.num_rows,
                                                          pa.string()))
            lengths = lengths[~empty]  # empty documents own no tokens: flat is unchanged
        return BatchResult(kept=kept, removed=removed, payload=(flat, lengths))

    def join_payloads(self, payloads: list[tuple[np.ndarray, np.ndarray]]
                      ) -> tuple[np.ndarray, np.ndarray]:
        if not payloads:
            return np.empty(0, np.int32), np.empty(0, np.int64)
        return (np.concatenate([p[0] for p in payloads]),
                np.concatenate([p[1] for p in payloads]))

    def open(self, ctx: ShardContext) -> _TokenWriter:
        return _TokenWriter(self, ctx)

    # ------------------------------------------------------------------ after all shards
    def dataset_files(self, run_dir: Path, stage_name: str) -> list[Path]:
        out = self.output_dir(run_dir, stage_name)
        names = ("blend.json", "per_dataset_sequences.json")
        return [out / n for n in names] + [out / f"{n}.tmp" for n in names]

    def _epochs(self, by_source: dict[str, dict[str, dict[str, int]]],
                warnings: list[str]) -> dict[str, float]:
        """How many times training on the blend (``train_tokens``, or its own train tokens)
        goes through each weighted source's train tokens; a warning past ``max_epochs``."""
        tokens = {s: _train_tokens(v) for s, v in by_source.items()}
        weights = {s: n if self.weights is None and self.repeats is None
                   else self.entry_weight(s, n) or 0.0 for s, n in tokens.items()}
        weighted = {s: w for s, w in weights.items() if w and tokens[s]}
        total = sum(weighted.values())
        budget = self.train_tokens or (sum(weighted.values()) if self.repeats is not None
                                       else sum(tokens[s] for s in weighted))
        epochs = {s: round(w / total * budget / tokens[s], 3) for s, w in weighted.items()}
        for source, times in epochs.items():
            if times > self.max_epochs:
                warnings.append(f"source {source!r} is repeated {times:.1f} times in training "
                                f"(its weight's share of {budget:,} tokens over its "
                                f"{tokens[source]:,}), more than max_epochs={self.max_epochs:g}")
        return epochs

    def finalize(self, run_dir: Path, stage_name: str,
                 shard_infos: list[dict[str, Any]]) -> dict[str, Any]:
        out = self.output_dir(run_dir, stage_name)
        warnings: list[str] = []
        self.check_one_tokenizer(out, shard_infos)
        vocab = next((i["vocab_size"] for i in shard_infos if i.get("vocab_size")), None)
        if vocab is None:
            vocab = self._tokenizer().vocab_size
        report = vocab_report(int(vocab), self.tensor_parallel_size, warn=False)
        warnings += report["warnings"]

        per_source = self.source_field is None and len(
            {i.get("source_stage") for i in shard_infos if i.get("files")} - {None}) > 1
        default_source = self.dataset_name or stage_name
        groups: dict[tuple[str, str], list[ShardInfo]] = {}
        for info in sorted(shard_infos, key=lambda i: i["part"]):
            for f in info["files"]:
                source = (f["source"] if self.source_field or self.group_by or per_source
                          else default_source)
                groups.setdefault((source, f["split"]), []).append(ShardInfo(
                    prefix=str(out / f["prefix"]), num_sequences=f["documents"],
                    num_documents=f["documents"], num_tokens=f["tokens"],
                    num_bytes=f["bytes"], dtype=f["dtype"]))
        by_source: dict[str, dict[str, dict[str, int]]] = {}
        by_split: dict[str, dict[str, int]] = {}
        groups = dict(sorted(groups.items(), key=lambda kv: (kv[0][0], SPLITS.index(kv[0][1]))))
        for (source, split), shards in groups.items():
            tokens = sum(s.num_tokens for s in shards)
            docs = sum(s.num_documents for s in shards)
            by_source.setdefault(source, {})[split] = {"tokens": tokens, "documents": docs}
            entry = by_split.setdefault(split, {"tokens": 0, "documents": 0})
            entry["tokens"] += tokens
            entry["documents"] += docs

        sources = sorted(by_source)
        if self.weights is not None:
            missing = [s for s in sources if s not in self.weights]
            unused = sorted(set(self.weights) - set(sources))
            if missing:
                warnings.append(f"sources {missing} have no entry in 'weights' and are left out "
                                "of the blend")
            if unused:
                warnings.append(f"'weights' names sources that have no tokens: {unused}")
        blend = Blend()
        for (source, split), shards in groups.items():
            tokens = sum(s.num_tokens for s in shards)
            weight = self.entry_weight(source, tokens)
            if (self.weights is not None or self.repeats is not None) and not weight:
                continue
            if tokens:
                blend.add(source, shards, weight=weight, split=split)
        result: dict[str, Any] = {
            "output": str(out.resolve()),
            "tokens": sum(e["tokens"] for e in by_split.values()),
            "documents": sum(e["documents"] for e in by_split.values()),
            "files": sum(len(s) for s in groups.values()),
            "by_source": by_source, "by_split": by_split,
            "vocab_size": report["vocab_size"],
            "padded_vocab_size": report["padded_vocab_size"],
            "tensor_parallel_size": self.tensor_parallel_size,
            "encoders": sorted({i["encoder"] for i in shard_infos if i.get("encoder")}),
        }
        if self.repeat_field:
            result["repeated"] = {k: sum(i.get("repeated", {}).get(k, 0) for i in shard_infos)
                                  for k in ("copies", "tokens", "not_written")}
        if self.seq_length:
            result["seq_length"] = self.seq_length
            for split, entry in by_split.items():
                # GPTDataset: (tokens - 1) // seq_length samples per epoch (one extra token each)
                entry["samples_per_epoch"] = max(0, entry["tokens"] - 1) // self.seq_length
                if entry["samples_per_epoch"] == 0:
                    warnings.append(f"split {split!r} has {entry['tokens']} tokens, fewer than "
                                    f"one sample of seq_length + 1 = {self.seq_length + 1}")
        result["epochs"] = self._epochs(by_source, warnings)
        if blend.splits():
            doc = blend.write(str(out))
            result["blend"] = str((out / "blend.json").resolve())
            result["per_dataset_sequences"] = doc["per_dataset_sequences_path"]
            warnings += doc.get("warnings", [])
        elif result["tokens"]:
            warnings.append("no source with tokens has a weight in 'weights'; no blend file")
        else:
            warnings.append("no tokens were written; no blend file")
        _remove_stale_temporaries(out, self.base_name(stage_name))
        result["warnings"] = warnings
        return result


def _train_tokens(splits: dict[str, dict[str, int]]) -> int:
    return splits.get("train", {}).get("tokens", 0)


class _TokenWriter:
    """One input shard's pieces, one sharded writer per (source, split), opened on first use."""

    def __init__(self, stage: Tokenize, ctx: ShardContext) -> None:
        self.stage, self.ctx = stage, ctx
        self.name = ctx.stage_name
        self.out = stage.output_dir(ctx.run_dir, ctx.stage_name)
        self.base = stage.base_name(ctx.stage_name)
        self.default_source = stage.dataset_name or ctx.stage_name
        self.tok = stage._tokenizer()
        self.eod = self.tok.eod_id if stage.append_eod else None
        self.writers: dict[tuple[str, str], ShardedIndexedDatasetWriter] = {}
        # source_field unset: the shard is one source's (its source stage); named at close by
        # the source column's most common value, grouped per source by finalize if several
        self.by_shard = stage.source_field is None and not stage.group_by
        self.copies = 0  # documents written more than once: the extra copies and their tokens
        self.copy_tokens = 0
        self.not_written = 0  # documents whose repeat count is 0
        self.source_values: Counter[str] = Counter()

    def _temporary(self, final: str) -> str:
        return str(self.ctx.temporary_for(Path(final)))

    def _writer(self, source: str, split: str) -> ShardedIndexedDatasetWriter:
        key = (source, split)
        if key not in self.writers:
            name = self.base
            if self.stage.entry_columns():
                name += f"_{safe_name(source)}"
            if self.stage.split:
                name += f"_{split}"
            self.writers[key] = ShardedIndexedDatasetWriter(
                str(self.out), f"{name}_{self.ctx.shard.part.removeprefix('part-')}",
                vocab_size=self.tok.vocab_size, eod_id=self.eod,
                max_shard_tokens=self.stage.max_shard_tokens,
                max_shard_bytes=self.stage.max_shard_bytes, keep_empty=self.stage.keep_empty,
                temporary=self._temporary,
                shuffle_seed=[self.stage.seed, xxhash.xxh3_64_intdigest(
                    self.ctx.shard.part.encode())] if self.stage.shuffle
                else None)
        return self.writers[key]

    def write(self, table: pa.Table, payload: tuple[np.ndarray, np.ndarray]) -> list[Failure]:
        if table.num_rows == 0:
            return []
        flat, lengths = payload
        if self.stage.repeat_field:
            table, flat, lengths = self._repeated(table, flat, lengths)
            if table.num_rows == 0:
                return []
        keys = self._keys(table)
        try:
            if len(keys) == 1:
                self._writer(*next(iter(keys))).add_flat(flat, lengths)
                return []
            per_token = np.repeat(np.arange(table.num_rows), lengths)
            for key, rows in keys.items():
                mask = np.zeros(table.num_rows, dtype=bool)
                mask[rows] = True
                self._writer(*key).add_flat(flat[mask[per_token]], lengths[mask])
        except TokenOutOfVocabError as err:
            raise TokenOutOfVocabError(
                f"stage {self.name!r}: {err}. The tokenizer {self.tok.path!r} produced an id its "
                f"vocabulary ({self.tok.vocab_size}) does not hold: it is misconfigured, so the "
                "run stops") from None
        return []

    def _repeated(self, table: pa.Table, flat: np.ndarray, lengths: np.ndarray
                  ) -> tuple[pa.Table, np.ndarray, np.ndarray]:
        """Each document and its tokens ``repeat_field`` times in a row."""
        times = table.column(self.stage.repeat_field).cast(pa.int64()).fill_null(1).to_numpy(
            zero_copy_only=False).clip(0)
        extra = np.maximum(times - 1, 0)
        self.copies += int(extra.sum())
        self.copy_tokens += int((lengths * extra).sum())
        self.not_written += int((times == 0).sum())
        rows = np.repeat(np.arange(table.num_rows), times)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        new_lengths = lengths[rows]
        offsets = np.concatenate([[0], np.cumsum(new_lengths)[:-1]]).astype(np.int64)
        token_rows = np.repeat(np.arange(len(rows)), new_lengths)
        index = starts[rows][token_rows] + np.arange(int(new_lengths.sum())) - offsets[token_rows]
        return table.take(pa.array(rows, pa.int64())), flat[index], new_lengths

    def _keys(self, table: pa.Table) -> dict[tuple[str, str], np.ndarray]:
        """Row indices per (source, split), in order of first appearance."""
        n = table.num_rows
        if self.by_shard and SOURCE in table.column_names:
            self.source_values.update(s for s in table.column(SOURCE).to_pylist() if s)
        sources = self.stage.entry_names(table, self.default_source)
        if self.stage.split:
            splits = [SPLITS[i] for i in split_of(table.column(ID).to_pylist(), self.stage.split,
                                                   self.stage.seed)]
        else:
            splits = ["train"] * n
        if not self.stage.entry_columns() and not self.stage.split:
            return {(self.default_source, "train"): np.arange(n)}
        groups: dict[tuple[str, str], list[int]] = {}
        for i, key in enumerate(zip(sources, splits, strict=True)):
            groups.setdefault(key, []).append(i)
        return {k: np.asarray(v) for k, v in groups.items()}

    def close(self) -> dict[str, Any]:
        files = []
        shard_source = self.source_values.most_common(1)[0][0] if self.source_values \
            else self.ctx.shard.source or self.default_source
        for (source, split), writer in self.writers.items():
            for info in writer.close():
                files.append({"prefix": Path(info.prefix).name,
                              "source": shard_source if self.by_shard else source,
                              "split": split, "tokens": info.num_tokens,
                              "documents": info.num_documents, "bytes": info.num_bytes,
                              "dtype": info.dtype})
        return {"part": self.ctx.shard.part, "source_stage": self.ctx.shard.source or None,
                "files": files,
                "tokens": sum(f["tokens"] for f in files),
                "documents": sum(f["documents"] for f in files),
                "repeated": {"copies": self.copies, "tokens": self.copy_tokens,
                             "not_written": self.not_written},
                "vocab_size": self.tok.vocab_size, "tokenizer_hash": self.stage._tok_hash,
                "encoder": self.tok.encoder_note}


def _encode(tok: Tokenizer, texts: list[str | None]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of ``texts`` as one flat array and per-document lengths (no EOD).

    Encoded slice by slice (:meth:`Tokenizer.encode_batch_flat`), so the tokenizer's per-token
    objects never exist for more than one slice of the batch at a time."""
    return tok.encode_batch_flat(["" if t is None else t for t in texts])


def _remove_stale_temporaries(out: Path, base: str) -> None:
    """Temporary files a killed shard left behind (committed shards never leave any)."""
    if out.is_dir():
        for tmp in out.glob(f".{base}_*_text_document.*.tmp"):
            tmp.unlink(missing_ok=True)
