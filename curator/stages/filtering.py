"""Filter decisions from named rules: every rule is evaluated and counted; a document's reason
is its first failing rule; scores may stay on the rows as columns."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc


@dataclass
class Verdict:
    table: pa.Table  # the batch, with the score columns appended when they are kept
    reasons: pa.Array  # null (keep) or the first failing rule's reason, per row
    failures: dict[str, int]  # rows failing each rule (a row may fail several)


def apply_rules(batch: pa.Table, rules: dict[str, pa.Array], scores: dict[str, pa.Array],
                keep_scores: bool) -> Verdict:
    """Combine failing-masks (reason -> mask, in precedence order) into one reason per row."""
    reasons = pa.nulls(batch.num_rows, pa.string())
    failures = {}
    for reason, mask in reversed(list(rules.items())):
        mask = pc.fill_null(mask, False)
        failures[reason] = pc.sum(mask).as_py() or 0
        reasons = pc.if_else(mask, pa.scalar(reason, pa.string()), reasons)
    table = batch
    if keep_scores:
        for name, values in scores.items():
            if name in table.column_names:
                table = table.drop_columns([name])
            table = table.append_column(name, values)
    return Verdict(table, reasons, dict(reversed(list(failures.items()))))
