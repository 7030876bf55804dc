"""tokenize killed with SIGKILL (driver, scheduler and workers) between a shard's pieces and its
manifest, after the last shard but before the blend file, and after the blend file but before the
run ended, then run again with the same command, gives the uninterrupted run's bytes: every
.bin/.idx piece, blend.json, per_dataset_sequences.json, rejected/, errors/ and stats.json."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from curator.tokenization.training import train_bpe
from tests.conftest import SAMPLE, assert_accounting
from tests.runtime import killing

SHARDS = 24


def _inputs(folder: Path, copies: int) -> Path:
    """The bundled sample ``copies`` times over ``SHARDS`` files, a source per document (en/ja),
    an empty document (removed) in every fourth shard, bad lines (errors/) in a few."""
    docs = []
    for path in sorted(SAMPLE.glob("*.jsonl.gz")):
        source = "ja" if path.name.startswith("aozora") else "en"
        with gzip.open(path, "rt", encoding="utf-8") as f:
            docs += [{"text": json.loads(line)["text"], "source": source} for line in f]
    shards: list[list[bytes]] = [[] for _ in range(SHARDS)]
    for copy in range(copies):
        for j, doc in enumerate(docs):
            shards[(copy * len(docs) + j) % SHARDS].append(
                json.dumps({**doc, "copy": copy}, ensure_ascii=False).encode())
    folder.mkdir(parents=True)
    for i, lines in enumerate(shards):
        if i % 4 == 2:
            lines.insert(3, b'{"text": "", "source": "en", "copy": -1}')
        if i % 7 == 1:
            lines += [b'{"text": "unterminated', b'{"text": "caf\xe9 au lait"}']
        (folder / f"shard-{i:03d}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return folder


def _config(base: Path, inputs: Path, tokenizer: Path) -> Path:
    config = base / "pipeline.yaml"
    config.write_text(f"""
name: kill-tokenize
batch_bytes: 65536
executor: {{type: dask, workers: 2}}
stages:
  - {{type: read_jsonl, path: "{inputs}/*.jsonl"}}
  - type: tokenize
    tokenizer: {tokenizer}
    source_field: source
    weights: {{en: 3, ja: 7}}
    split: {{train: 0.8, valid: 0.1, test: 0.1}}
    seq_length: 128
    max_shard_tokens: 40000
    tensor_parallel_size: 2
""")
    return config


def _blend(run_dir: Path) -> Path:
    return run_dir / "tokens" / "blend.json"


def _before_blend(run_dir: Path, halted: dict, reference: Path | None) -> str | None:
    """Halted in the driver once every shard is committed, before the writers' finalize."""
    if (n := killing.shards_done(run_dir, 0)) != SHARDS:
        return f"{n} of {SHARDS} shards committed"
    return "blend.json was already written" if _blend(run_dir).exists() else None


def _after_blend(run_dir: Path, halted: dict, reference: Path | None) -> str | None:
    """Halted in the driver after the writers' finalize, before stats.json."""
    return None if _blend(run_dir).exists() else "blend.json not written"


POINTS = {
    # a shard's .bin/.idx pieces renamed into place, its manifest not yet written
    "shards": killing.in_shards(0, SHARDS, SHARDS // 4, committing=True),
    "before-blend": killing.KillPoint("last shard committed, no blend.json",
                                      "finalize:segment-00", 1, _before_blend),
    "after-blend": killing.KillPoint("blend.json written, run not ended", "stats", 1,
                                     _after_blend),
}


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    base = tmp_path_factory.mktemp("kill-tokenize")
    train_bpe(2000, files=sorted(SAMPLE.glob("*.jsonl.gz")), output=base / "tok")
    config = _config(base, _inputs(base / "in", copies=4), base / "tok" / "tokenizer.json")
    reference = killing.reference_run(config, base / "run", base / "reference", base / "ref.log")
    stats = killing.stats(reference)
    tokenize = stats["stages"][1]
    assert tokenize["removed"] > 0 and stats["stages"][0]["failed"] > 0
    assert tokenize["files"] > 2 * SHARDS  # several pieces per shard
    assert (reference / "tokens" / "blend.json").exists()
    return config, base / "run", reference


@pytest.mark.parametrize("point", list(POINTS))
def test_tokenize_killed_resumes_to_identical_bytes(point, case, tmp_path):
    config, run_dir, reference = case
    killing.kill_and_resume(config, run_dir, POINTS[point], tmp_path / "run.log", reference)
    assert killing.differences(run_dir, reference) == []
    assert_accounting(run_dir)
