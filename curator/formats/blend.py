"""Blend files: which shards a trainer reads, with what weight, spelled the way each trainer
wants.

A *source* (``wikipedia``, ``cc-ja``, ...) has a relative weight and a list of shards. The weight
of a shard is ``source_weight * shard_tokens / source_tokens``, so a source is drawn at its weight
and its shards in proportion to their size. Weights are normalised to sum to 1 per split (Megatron
normalises again; writing them normalised makes the file readable as shares). When no weight is
given for a source, its token count is used: the natural mix.

``blend.json`` carries, per split, the exact strings to paste:

* Megatron-LM: ``--data-path W1 PREFIX1 W2 PREFIX2 ...`` (or ``--train-data-path`` /
  ``--valid-data-path`` / ``--test-data-path`` when there are several splits), and
  ``--per-dataset-sequences-path per_dataset_sequences.json``;
* NeMo 2: ``paths=[...]`` for ``PreTrainingDataModule`` (a dict with
  ``train``/``validation``/``test`` when there are several splits);
* Megatron-Core directly: ``blend=([prefixes], [weights])`` for ``GPTDatasetConfig``.

``per_dataset_sequences.json`` maps each prefix to ``[sequence_count, document_count]`` where
``document_count`` is the ``.idx``'s ``len(document_indices)`` (documents + 1), which is what
megatron-core reads in place of opening every ``.idx`` header.
"""

from __future__ import annotations

import json
import math
import os
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field

from curator.formats.megatron import ShardInfo

__all__ = ["SPLITS", "Blend", "BlendError", "format_weight"]

SPLITS = ("train", "valid", "test")
_MEGATRON_SPLIT_FLAGS = {
    "train": "--train-data-path",
    "valid": "--valid-data-path",
    "test": "--test-data-path",
}
_NEMO_SPLIT_KEYS = {"train": "train", "valid": "validation", "test": "test"}


class BlendError(ValueError):
    pass


def format_weight(w: float) -> str:
    """Shortest round-trip decimal (``repr``), never exponent notation for ordinary shares."""
    if not math.isfinite(w) or w < 0:
        raise BlendError(f"weight must be a finite non-negative number, got {w!r}")
    s = repr(float(w))
    if "e" in s or "E" in s:
        s = f"{w:.17f}".rstrip("0").rstrip(".") or "0"
    return s


@dataclass
class _Source:
    name: str
    split: str
    weight: float | None
    shards: list[ShardInfo] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(s.num_tokens for s in self.shards)

    @property
    def documents(self) -> int:
        return sum(s.num_documents for s in self.shards)


class Blend:
    """Collect shards per source and split; write ``blend.json`` and
    ``per_dataset_sequences.json``."""

    def __init__(self) -> None:
        self._sources: dict[tuple[str, str], _Source] = {}

    def add(
        self,
        source: str,
        shards: Iterable[ShardInfo],
        *,
        weight: float | None = None,
        split: str = "train",
    ) -> None:
        if split not in SPLITS:
            raise BlendError(f"split must be one of {SPLITS}, got {split!r}")
        if weight is not None and (not math.isfinite(weight) or weight < 0):
            raise BlendError(
                f"weight of source {source!r} must be a non-negative number, got {weight!r}"
            )
        key = (split, source)
        src = self._sources.setdefault(key, _Source(source, split, weight))
        if weight is not None:
            if src.weight is not None and src.weight != weight:
                raise BlendError(
                    f"source {source!r} ({split}) given two weights: {src.weight} and {weight}"
                )
            src.weight = weight
        src.shards.extend(shards)

    # ------------------------------------------------------------------------------------------
    def splits(self) -> list[str]:
        return [s for s in SPLITS if any(k[0] == s for k in self._sources)]

    def weighted_prefixes(
        self, split: str = "train", *, absolute: bool = True
    ) -> tuple[list[str], list[float]]:
        """``(prefixes, weights)`` for one split, weights summing to 1; empty shards dropped."""
        sources = [s for (sp, _), s in sorted(self._sources.items()) if sp == split]
        if not sources:
            raise BlendError(f"no sources for split {split!r}")
        explicit = [s.weight is not None for s in sources]
        if any(explicit) and not all(explicit):
            missing = [s.name for s in sources if s.weight is None]
            raise BlendError(
                f"split {split!r}: give a weight to every source or to none; missing for {missing}"
            )
        prefixes, raw = [], []
        for s in sources:
            total = s.tokens
            if total == 0:
                continue
            w = s.weight if s.weight is not None else float(total)
            for sh in s.shards:
                if sh.num_tokens == 0:
                    continue
                prefixes.append(os.path.abspath(sh.prefix) if absolute else sh.prefix)
                raw.append(w * sh.num_tokens / total)
        z = sum(raw)
        if z <= 0:
            raise BlendError(f"split {split!r} has no tokens with a positive weight")
        return prefixes, [r / z for r in raw]

    def data_path_list(self, split: str = "train") -> list[str]:
        """``["w1", "prefix1", "w2", "prefix2", ...]`` (what ``get_blend_from_list`` parses)."""
        prefixes, weights = self.weighted_prefixes(split)
        out: list[str] = []
        for p, w in zip(prefixes, weights, strict=True):
            out += [format_weight(w), p]
        return out

    def per_dataset_sequences(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for src in self._sources.values():
            for sh in src.shards:
                if sh.num_tokens:
                    out[os.path.abspath(sh.prefix)] = sh.sequences_entry
        return dict(sorted(out.items()))

    def to_dict(self, per_dataset_sequences_path: str | None = None) -> dict:
        splits = self.splits()
        if not splits:
            raise BlendError("the blend is empty")
        doc: dict = {"format": "curator-blend/1", "splits": {}}
        for sp in splits:
            prefixes, weights = self.weighted_prefixes(sp)
            share = dict(zip(prefixes, weights, strict=True))
            srcs = {}
            for (s_sp, name), s in sorted(self._sources.items()):
                if s_sp != sp:
                    continue
                srcs[name] = {
                    "weight": s.weight if s.weight is not None else s.tokens,
                    "weight_given": s.weight is not None,
                    "share": sum(share.get(os.path.abspath(sh.prefix), 0.0) for sh in s.shards),
                    "tokens": s.tokens,
                    "documents": s.documents,
                    "shards": [
                        {
                            "prefix": os.path.abspath(sh.prefix),
                            "tokens": sh.num_tokens,
                            "documents": sh.num_documents,
                            "dtype": sh.dtype,
                            "weight": share.get(os.path.abspath(sh.prefix), 0.0),
                        }
                        for sh in s.shards
                    ],
                }
            dp = self.data_path_list(sp)
            doc["splits"][sp] = {
                "sources": srcs,
                "tokens": sum(v["tokens"] for v in srcs.values()),
                "documents": sum(v["documents"] for v in srcs.values()),
                "data_path": dp,
                "megatron_core_blend": [prefixes, weights],
            }
        single = splits == ["train"]
        if single:
            mlm = "--data-path " + " ".join(
                shlex.quote(x) for x in doc["splits"]["train"]["data_path"]
            )
            nemo = "paths=" + json.dumps(doc["splits"]["train"]["data_path"])
        else:
            mlm = " ".join(
                _MEGATRON_SPLIT_FLAGS[sp]
                + " "
                + " ".join(shlex.quote(x) for x in doc["splits"][sp]["data_path"])
                for sp in splits
            )
            nemo = "paths=" + json.dumps(
                {_NEMO_SPLIT_KEYS[sp]: doc["splits"][sp]["data_path"] for sp in splits}
            )
        doc["megatron_lm"] = mlm
        doc["nemo2"] = nemo
        if per_dataset_sequences_path is not None:
            p = os.path.abspath(per_dataset_sequences_path)
            doc["per_dataset_sequences_path"] = p
            doc["megatron_lm_per_dataset_sequences"] = (
                "--per-dataset-sequences-path " + shlex.quote(p)
            )
        dtypes = sorted({sh.dtype for s in self._sources.values() for sh in s.shards})
        doc["token_dtype"] = dtypes[0] if len(dtypes) == 1 else dtypes
        if len(dtypes) > 1:
            doc["warnings"] = [
                f"shards use several token dtypes {dtypes}; "
                "--per-dataset-sequences-path assumes one"
            ]
        return doc

    def write(
        self,
        directory: str,
        name: str = "blend.json",
        sequences_name: str = "per_dataset_sequences.json",
    ) -> dict:
        """Write both files atomically into ``directory``; returns the blend dict."""
        os.makedirs(directory, exist_ok=True)
        seq_path = os.path.join(directory, sequences_name)
        doc = self.to_dict(per_dataset_sequences_path=seq_path)
        _write_json(seq_path, self.per_dataset_sequences())
        _write_json(os.path.join(directory, name), doc)
        return doc


def _write_json(path: str, obj) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)
