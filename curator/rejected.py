"""What ``rejected/<stage>/`` keeps of a removed document when the run keeps ids only
(``rejected: ids``, the default): its id, reason and the stage's columns, and the text of a
deterministic sample, so that ``curate show`` can print what a stage removed and why. Likewise
``rewrites/<stage>/``, the text before a rewriting stage: of every rewritten document with
``rejected: documents``, of the sample's with ``rejected: ids``.

The sample is every document whose id hashes (XXH3-64) to 0 modulo :data:`SAMPLE_EVERY`: about
1 % of each stage's and reason's removals, the same documents whatever the batching, executor or
rerun. Its cost is about 1 % of the removed text (zstd-compressed)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from curator.batch import ID, REASON, TEXT

SAMPLE_EVERY = 100


def in_sample(ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Whether each id is in the kept-text sample."""
    return np.fromiter((id_ is not None
                        and xxhash.xxh3_64_intdigest(str(id_).encode()) % SAMPLE_EVERY == 0
                        for id_ in ids.to_pylist()), bool, count=len(ids))


def ids_and_sample(removed: pa.Table, columns: list[str] | tuple[str, ...] = ()) -> pa.Table:
    """``removed`` as ``rejected: ids`` keeps it: id, reason, ``columns``, and ``text`` for the
    sample (null for the others); all of it where ``columns`` (a stage's rewritten ones, as
    decontamination's cut text) hold it."""
    out = removed.select([ID, REASON, *columns])
    if TEXT not in removed.column_names or TEXT in columns:  # a stage that rewrote it keeps it
        return out
    text = removed.column(TEXT)
    keep = pa.array(in_sample(removed.column(ID)))
    sample = pc.if_else(keep, text, pa.nulls(len(text), text.type))
    return out.append_column(pa.field(TEXT, text.type), sample)


def rewritten(before: pa.Table, rejected: str) -> pa.Table:
    """``id`` and ``text`` of the rows of ``before`` (texts a stage then changed) that
    ``rewrites/`` keeps: all of them with ``rejected: documents``, the sample's with ``ids``."""
    rows = before.select([ID, TEXT])
    return rows if rejected == "documents" else rows.filter(pa.array(in_sample(rows.column(ID))))
