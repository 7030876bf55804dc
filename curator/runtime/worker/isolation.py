"""One stage meets one batch so that bad documents fail alone and a broken stage stops the run.

* A document over the stage's ``max_document_bytes`` fails (reason ``too_large``) before it.
* A stage with ``timeout_s``, and every stage of a shard re-run after its worker died, runs in
  a sandbox process, each document guarded on its own (``curator.runtime.worker.sandbox``); one
  child per worker thread serves all such stages of the segment.
* Otherwise the stage gets the whole batch, as fast as it can go. If it raises, single documents
  sampled from the batch tell a broken stage (stopped by the failure budget after a few calls)
  from a few poison documents, which bisection then finds.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from curator.batch import ID, TEXT, BatchResult, Failure, join_results
from curator.runtime.worker.budget import FailureBudget
from curator.runtime.worker.sandbox import run_sandboxed
from curator.stages.base import BatchStage, Sink

PROBES = 32  # single documents sampled from a batch the stage failed on as a whole


def sandboxed(stage: BatchStage, isolate: bool) -> bool:
    """Whether ``stage`` runs in a sandbox process (writers never do: they write in the task)."""
    return not isinstance(stage, Sink) and (isolate or stage.timeout_s is not None)


def apply_stage(stage: BatchStage, batch: pa.Table, name: str, budget: FailureBudget,
                isolate: bool = False) -> BatchResult:
    """Run ``stage`` on ``batch``: kept, removed and failed rows, every row accounted for."""
    too_large: list[Failure] = []
    if stage.max_document_bytes is not None:
        batch, too_large = _size_limit(batch, stage.max_document_bytes, name)
        if batch.num_rows == 0:
            return BatchResult(kept=batch, failed=too_large)
    if sandboxed(stage, isolate):
        def progress(done: int, failed: int) -> None:
            budget.check_sample(budget.failed + len(too_large) + failed,
                                budget.seen + len(too_large) + done, "the first {n} documents")

        result = run_sandboxed(stage, name, batch, progress)
    else:
        result = _guarded(stage, batch, name, budget)
    if too_large:
        result.failed = too_large + result.failed
    return result


def _size_limit(batch: pa.Table, limit: int, name: str) -> tuple[pa.Table, list[Failure]]:
    """Rows whose text is over ``limit`` bytes, failed; the others, passed on."""
    size = pc.binary_length(batch.column(TEXT))
    over = pc.fill_null(pc.greater(size, limit), False)
    if not pc.any(over).as_py():
        return batch, []
    big = batch.filter(over)
    failures = [Failure(stage=name, id=i, reason="too_large",
                        error=f"too_large: {n} bytes of text, over max_document_bytes={limit}")
                for i, n in zip(big.column(ID).to_pylist(), size.filter(over).to_pylist(),
                                strict=True)]
    return batch.filter(pc.invert(over)), failures


def _guarded(stage: BatchStage, batch: pa.Table, name: str, budget: FailureBudget) -> BatchResult:
    try:
        return stage.process(batch)
    except Exception as err:  # a poison document or a broken stage: tell which
        if batch.num_rows >= 2 * PROBES:
            _probe(stage, batch, name, budget)
        return _bisect(stage, batch, name, err)


def _probe(stage: BatchStage, batch: pa.Table, name: str, budget: FailureBudget) -> None:
    """Run the stage on ``PROBES`` single documents spread over ``batch``; stop the run if it
    fails clearly more of them than the budget allows."""
    n = batch.num_rows
    failures = []
    for i in range(PROBES):
        row = batch.slice((2 * i + 1) * n // (2 * PROBES), 1)
        try:
            stage.process(row)
        except Exception as err:
            failures.append(_failure(name, row, err))
    budget.note(failures)
    budget.check_sample(len(failures), PROBES, "{n} sampled documents")


def _bisect(stage: BatchStage, batch: pa.Table, name: str, err: Exception) -> BatchResult:
    """``stage`` raised ``err`` on ``batch``: split it until only the bad rows fail."""
    if batch.num_rows <= 1:
        return BatchResult(kept=batch.slice(0, 0), failed=[_failure(name, batch, err)])
    half = batch.num_rows // 2
    join = stage.join_payloads if isinstance(stage, Sink) else None
    return join_results([_attempt(stage, batch.slice(0, half), name),
                         _attempt(stage, batch.slice(half), name)], batch.slice(0, 0), join)


def _attempt(stage: BatchStage, batch: pa.Table, name: str) -> BatchResult:
    try:
        return stage.process(batch)
    except Exception as err:
        return _bisect(stage, batch, name, err)


def _failure(name: str, row: pa.Table, err: Exception) -> Failure:
    return Failure(stage=name, error=f"{type(err).__name__}: {err}",
                   id=row.column(ID)[0].as_py() if row.num_rows else None)
