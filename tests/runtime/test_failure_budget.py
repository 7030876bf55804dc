"""A stage that fails (nearly) every document is a bug: the run stops after a few calls, naming
the stage, the shard and the first error. A few poison documents still fail alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from curator import Pipeline, ReadJsonl, WriteParquet
from curator.batch import BatchResult
from curator.runtime.worker.shard_task import CurationError
from curator.stages.base import BatchStage
from tests.conftest import ROOT, assert_accounting, write_shards
from tests.published import part_files

N = 20_000


class Explode(BatchStage):
    """Raises on every batch that holds a document containing ``poison`` (every one: '')."""

    type = "test_explode"
    calls: ClassVar[int] = 0

    poison: str = ""

    def process(self, batch: pa.Table) -> BatchResult:
        type(self).calls += 1
        if pc.any(pc.match_substring(batch.column("text"), self.poison)).as_py():
            raise ValueError(f"explode on {self.poison!r}")
        return BatchResult(kept=batch)


def _documents(path: Path, poisoned: set[int] = frozenset()) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for i in range(N):
            text = f"document {i} " + ("POISON" if i in poisoned else "fine")
            f.write(json.dumps({"id": f"d{i}", "text": text}) + "\n")
    return path


def test_a_stage_failing_every_document_stops_the_run_after_few_calls(tmp_path):
    """Defect 7: it was bisected down to single rows (39,999 calls for 20k rows) and the run
    finished with exit 0 and every document failed."""
    inputs = _documents(tmp_path / "in.jsonl")
    pipeline = Pipeline([ReadJsonl(path=str(inputs)), Explode(), WriteParquet()],
                        output=str(tmp_path / "run"))
    Explode.calls = 0
    try:
        pipeline.run(executor="local", progress=False)
    except CurationError as err:
        stopped = str(err)
    else:
        stopped = "the run finished"
    assert Explode.calls < 100, f"{Explode.calls} calls to process for {N} rows"
    assert f"stage 'test_explode' failed on 32 of 32 sampled documents of shard {inputs}" \
        in stopped
    assert "ValueError: explode on ''" in stopped


def test_a_few_poison_documents_fail_alone_in_few_calls(tmp_path):
    poisoned = {7, 12_345, 19_999}
    inputs = _documents(tmp_path / "in.jsonl", poisoned)
    Explode.calls = 0
    Pipeline([ReadJsonl(path=str(inputs)), Explode(poison="POISON"), WriteParquet()]).run(
        output=tmp_path / "run", executor="local", progress=False)
    assert Explode.calls < 200, f"{Explode.calls} calls to process"
    stage = assert_accounting(tmp_path / "run")["stages"][1]
    assert (stage["in"], stage["kept"], stage["failed"]) == (N, N - 3, 3)
    errors = [json.loads(line) for line in
              part_files(tmp_path / "run" / "errors" / "test_explode", ".jsonl")[0].open()]
    assert [e["id"] for e in errors] == [f"d{i}" for i in sorted(poisoned)]
    assert {e["file"] for e in errors} == {"in.jsonl"}


def test_a_shard_may_fail_up_to_max_failed_fraction(tmp_path):
    """10 poison documents of 100 pass at the default 0.1 and stop the run at 0.05."""
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("".join(json.dumps({"id": f"d{i}", "text": "POISON" if i % 10 == 0
                                          else "fine"}) + "\n" for i in range(100)))
    stages = [ReadJsonl(path=str(inputs)), Explode(poison="POISON")]
    Pipeline(stages).run(output=tmp_path / "a", executor="local", progress=False)
    assert assert_accounting(tmp_path / "a")["stages"][1]["failed"] == 10
    strict = Pipeline(stages, max_failed_fraction=0.05)
    with pytest.raises(CurationError, match=r"'test_explode' failed on 10 of the 100 documents"):
        strict.run(output=tmp_path / "b", executor="local", progress=False)


@pytest.mark.parametrize("executor", ["dask", "ray"])
def test_cli_stops_a_broken_stage_in_one_line(tmp_path, executor):
    if executor == "ray":
        pytest.importorskip("ray")
    inputs = tmp_path / "in"
    write_shards(inputs, 2, with_ids=True)
    calls = tmp_path / "calls"
    config = tmp_path / "p.yaml"
    config.write_text(f"""
name: broken
executor: {{type: {executor}, workers: 2}}
imports: [{Path(__file__).with_name("fault_stages.py")}]
stages:
  - {{type: read_jsonl, path: "{inputs}/*.jsonl"}}
  - {{type: test_broken, calls: "{calls}"}}
  - {{type: write_parquet}}
""")
    result = subprocess.run([sys.executable, "-m", "curator.cli", "run", str(config),
                             "--output", str(tmp_path / "run")], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert line.startswith("error: stage 'test_broken' failed on 32 of 32 sampled documents of "
                           f"shard {inputs}/shard-00"), line
    assert line.endswith("ValueError: this stage is broken"), line
    assert len(calls.read_bytes()) <= 2 * 33  # one whole batch and 32 samples per shard
