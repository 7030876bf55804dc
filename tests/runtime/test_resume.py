"""A run killed with SIGKILL mid-run and started again gives the uninterrupted run's output."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from tests.conftest import assert_accounting, write_shards
from tests.runtime import killing

N_SHARDS = 24


def _config(tmp: Path, inputs: Path) -> Path:
    config = tmp / "pipeline.yaml"
    config.write_text(f"""
name: resume
batch_bytes: 65536
executor: {{type: dask, workers: 2}}
stages:
  - {{type: read_jsonl, path: "{inputs}/*.jsonl"}}
  - {{type: length_filter, min_chars: 3000}}
  - {{type: sample, fraction: 0.8, seed: 3}}
  - {{type: write_parquet, row_group_rows: 50}}
""")
    return config


def test_sigkill_mid_run_then_resume_gives_identical_output(tmp_path):
    inputs = tmp_path / "in"
    write_shards(inputs, N_SHARDS, copies=12)
    config = _config(tmp_path, inputs)
    reference = killing.reference_run(config, tmp_path / "run", tmp_path / "reference",
                                      tmp_path / "reference.log")

    killed = tmp_path / "run"
    # the driver, the scheduler and both workers, once the third shard's manifest is written
    killing.kill_at(config, killed, killing.in_shards(0, N_SHARDS, 3), tmp_path / "run.log",
                    reference)
    committed = killing.shards_done(killed, 0)

    resumed = killing.run(config, killed, tmp_path / "resumed.log")
    assert f"{N_SHARDS - committed} shards run, {committed} resumed" in " ".join(resumed.split())

    assert killing.differences(killed, reference) == []
    assert_accounting(killed)
    ids = pq.read_table(killed / "write_parquet").column("id").to_pylist()
    assert len(ids) == len(set(ids)) > 0
    assert not killing.temporaries(killed), "temporary files left behind"
