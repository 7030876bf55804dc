"""``executor: ray`` writes the same bytes as Dask through barrier stages: exact and fuzzy dedup
(each a DatasetStage of several phases) and tokenize (Megatron .bin/.idx shards)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from curator.tokenization.training import train_bpe
from tests.conftest import ROOT, SAMPLE, sample_documents, write_shards
from tests.runtime.killing import outputs


def _inputs(folder: Path) -> Path:
    """Two copies of the sample (exact duplicates) and a shard of near duplicates: each of the
    first documents with one word in twenty dropped."""
    write_shards(folder, 3, copies=2)
    near = []
    for doc in sample_documents()[:20]:
        words = doc["text"].split(" ")
        near.append({"text": " ".join(w for i, w in enumerate(words) if i % 20 != 7),
                     "source": doc["id"]})
    (folder / "shard-near.jsonl").write_text(
        "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in near), encoding="utf-8")
    return folder


def test_ray_and_dask_write_the_same_bytes_through_dedup_and_tokenize(tmp_path):
    pytest.importorskip("ray")
    train_bpe(512, files=sorted(SAMPLE.glob("*.jsonl.gz")), output=tmp_path / "tok")
    inputs = _inputs(tmp_path / "in")
    config = tmp_path / "pipeline.yaml"
    config.write_text(f"""
name: ray-bytes
stages:
  - {{type: read_jsonl, path: "{inputs}/*.jsonl"}}
  - {{type: exact_dedup}}
  - {{type: fuzzy_dedup, device: cpu, buckets: 4}}
  - {{type: tokenize, tokenizer: {tmp_path / "tok" / "tokenizer.json"}, seq_length: 128}}
""")
    got = {}
    for executor in ("ray", "dask"):
        run = subprocess.run([sys.executable, "-m", "curator.cli", "run", str(config),
                              "--executor", executor, "--workers", "2", "--output",
                              str(tmp_path / executor)], cwd=ROOT, capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        where = str(tmp_path / executor).encode()  # blend.json names its files by full path
        got[executor] = {k: v.replace(where, b"<run>") for k, v in
                         outputs(tmp_path / executor).items()}
    stats = json.loads((tmp_path / "ray" / "stats.json").read_text())
    removed = {s["name"]: s["removed"] for s in stats["stages"]}
    assert removed["exact_dedup"] > 0 and removed["fuzzy_dedup"] > 0, removed
    assert any(name.endswith(".bin") for name in got["ray"])
    assert got["ray"] == got["dask"]
