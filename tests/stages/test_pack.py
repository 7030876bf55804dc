"""The ``pack`` stage end to end: real question/answer pairs (GSM8K), a BPE trained here, the real
runner on a real Dask cluster and locally, and the packed Parquet read back with pyarrow and cut
the way Megatron-Bridge's collate function cuts it."""

from __future__ import annotations

import gzip
import itertools
import json
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from curator import Pipeline, ReadJsonl
from curator.config import parse_pipeline
from curator.stages.pack import LONG_REASON, METADATA, PROMPT_REASON, Pack
from curator.stages.tokenize import EMPTY_REASON
from curator.tokenization.loading import Tokenizer, load_tokenizer
from curator.tokenization.training import train_bpe
from tests.conftest import SAMPLE, assert_accounting, deal, write_parts
from tests.published import part_files

SFT = SAMPLE / "sft" / "gsm8k_test_every4th.jsonl.gz"
PACK_SIZE = 512
N_SHARDS = 3


@pytest.fixture(scope="module")
def records() -> list[dict]:
    with gzip.open(SFT, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def input_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("input")


@pytest.fixture(scope="module")
def shards(records, input_dir) -> list[list[dict]]:
    """The sample over three shards; each shard also gets an empty answer, an answer too long
    for a pack and a prompt too long for one (real text: several answers or questions joined)."""
    parts = deal(records, N_SHARDS)
    for s, part in enumerate(parts):
        chunk = records[12 * s : 12 * s + 12]
        part.insert(3, {"id": f"empty-{s}", "input": part[0]["input"], "output": ""})
        part.insert(7, {"id": f"long-answer-{s}", "input": part[1]["input"],
                        "output": "\n".join(d["output"] for d in chunk)})
        part.insert(11, {"id": f"long-prompt-{s}", "input": "".join(d["input"] for d in chunk),
                         "output": part[2]["output"]})
    write_parts(input_dir, parts)
    return parts


@pytest.fixture(scope="module")
def input_glob(shards, input_dir) -> str:
    return str(input_dir / "part-*.jsonl")


@pytest.fixture(scope="module")
def tok_path(records, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("tok")
    train_bpe(1024, texts=[d["input"] + d["output"] for d in records], output=out)
    return str(out / "tokenizer.json")


@pytest.fixture(scope="module")
def tok(tok_path) -> Tokenizer:
    return load_tokenizer(tok_path)


def _pipeline(input_glob: str, tok_path: str, output: Path, **params) -> Pipeline:
    stage = {"tokenizer": tok_path, "pack_size": PACK_SIZE, "prompt_field": "input", **params}
    return Pipeline([ReadJsonl(path=input_glob, text_field="output"), Pack(**stage)], name="sft",
                    output=str(output))


def _expected(part: list[dict], tok: Tokenizer, truncate: bool = False, prompt: bool = True,
              eod: bool = True) -> tuple[Counter, dict[str, str]]:
    """What a shard's packs must hold, worked out from the documents alone: a Counter of
    (sequence, trained labels, truncated) and the reason of each removed document."""
    expected: Counter = Counter()
    reasons = {}
    for d in part:
        p = tok.encode(d["input"]) if prompt else []
        a = tok.encode(d["output"])
        seq = p + a + ([tok.eod_id] if eod else [])
        if not a:
            reasons[d["id"]] = EMPTY_REASON
        elif len(seq) > PACK_SIZE + 1 and not truncate:
            reasons[d["id"]] = LONG_REASON
        elif len(p) > PACK_SIZE:
            reasons[d["id"]] = PROMPT_REASON
        else:
            cut = seq[: PACK_SIZE + 1]
            # the trainer predicts cut[j + 1] from cut[j]: trained are the answer and the EOD
            expected[(tuple(cut), tuple(cut[max(len(p), 1) :]), len(cut) < len(seq))] += 1
    return expected, reasons


def _read_packs(path: Path) -> tuple[Counter, list[dict]]:
    """Cut every pack at seq_start_id as Bridge's collate does; check Bridge's row invariants."""
    f = pq.ParquetFile(path)
    assert f.schema_arrow == pa.schema([("input_ids", pa.list_(pa.int32())),
                                        ("loss_mask", pa.list_(pa.int8())),
                                        ("seq_start_id", pa.list_(pa.int32()))])
    rows = f.read().to_pylist()
    got: Counter = Counter()
    for r in rows:
        ids, mask, starts = r["input_ids"], r["loss_mask"], r["seq_start_id"]
        assert len(mask) == len(ids) and set(mask) <= {0, 1}
        assert starts[0] == 0 and starts == sorted(set(starts)) and starts[-1] < len(ids)
        assert len(ids) - len(starts) <= PACK_SIZE  # L - 1 tokens a sequence reach the trainer
        for b, e in itertools.pairwise([*starts, len(ids)]):
            labels, weights = ids[b + 1 : e], mask[b : e - 1]
            assert mask[e - 1] == 0
            trained = tuple(t for t, w in zip(labels, weights, strict=True) if w)
            got[(tuple(ids[b:e]), trained)] += 1
    return got, rows


def _pack_files(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((run_dir / "pack").glob("*.idx.parquet"))}


@pytest.fixture(scope="module")
def run_a(input_glob, tok_path, tmp_path_factory, dask_scheduler) -> Path:
    out = tmp_path_factory.mktemp("run") / "a"
    result = _pipeline(input_glob, tok_path, out).run(scheduler=dask_scheduler, progress=False)
    assert result.shards_run == N_SHARDS
    return out


def test_packs_hold_every_kept_document_with_loss_on_the_answer(run_a, shards, tok):
    stats = assert_accounting(run_a)
    stage = stats["stages"][1]
    all_rows, removed = [], {}
    for s, part in enumerate(shards):
        expected, reasons = _expected(part, tok)
        got, rows = _read_packs(part_files(run_a / "pack", ".idx.parquet")[s])
        assert got == Counter({k[:2]: n for k, n in expected.items()}), s
        all_rows += rows
        removed.update(reasons)
    assert {r for i, r in removed.items() if not i.startswith("gsm8k")} == {EMPTY_REASON,
                                                                           LONG_REASON}
    rejected = pq.read_table(run_a / "rejected" / "pack").to_pylist()
    assert {r["id"]: r["reason"] for r in rejected} == removed
    assert stage["removed_by_reason"] == dict(Counter(removed.values()))
    assert not list((run_a / "pack").glob(".*.tmp"))

    n_seqs = sum(len(r["seq_start_id"]) for r in all_rows)
    tokens = sum(len(r["input_ids"]) for r in all_rows)
    assert (stage["packs"], stage["sequences"], stage["tokens"], stage["files"]) == (
        len(all_rows), n_seqs, tokens, N_SHARDS)
    assert stage["sequences"] == stage["kept"]
    assert stage["loss_tokens"] == sum(sum(r["loss_mask"]) for r in all_rows)
    assert stage["packing_efficiency"] == round((tokens - n_seqs) / (len(all_rows) * PACK_SIZE), 4)
    assert stage["packing_efficiency"] > 0.9 and stage["truncated"] == 0
    metadata = json.loads((run_a / "pack" / METADATA).read_text())
    lengths = [b - a for r in all_rows
               for a, b in itertools.pairwise([*r["seq_start_id"], len(r["input_ids"])])]
    assert metadata == [{
        "dataset_max_seqlen": max(lengths) - 1,
        "max_samples_per_bin": max(len(r["seq_start_id"]) for r in all_rows),
        "packing_factor": round(n_seqs / len(all_rows), 2),
        "packing_efficiency": round(100 * (tokens - n_seqs) / (len(all_rows) * PACK_SIZE), 2),
        "pack_size": PACK_SIZE,
        "min_packed_seqlen": min(len(r["input_ids"]) - len(r["seq_start_id"]) for r in all_rows),
    }]


def test_rerun_after_a_cut_shard_and_other_executors_give_identical_bytes(
        run_a, input_glob, tok_path, tmp_path, dask_scheduler):
    files = _pack_files(run_a)
    assert len(files) == N_SHARDS
    # a run cut short: shard 1 never committed, a half-written pack file left behind
    rerun = tmp_path / "a"
    shutil.copytree(run_a, rerun)
    parts = [p.name.removesuffix(".idx.parquet") for p in part_files(rerun / "pack",
                                                                      ".idx.parquet")]
    (rerun / "_manifests" / "segment-00" / f"{parts[1]}.json").unlink()
    (rerun / "pack" / f"{parts[1]}.idx.parquet").unlink()
    for part in parts[1:3]:  # shard 2's: a kill after a commit's rename
        (rerun / "pack" / f".{part}.idx.parquet.tmp").write_bytes(b"PAR1" + b"\0" * 99)
    result = _pipeline(input_glob, tok_path, rerun).run(scheduler=dask_scheduler, progress=False)
    assert (result.shards_run, result.shards_skipped) == (1, N_SHARDS - 1)
    assert _pack_files(rerun) == files
    assert not list((rerun / "pack").glob(".*.tmp"))
    # the local executor with small batches: the same bytes
    other = tmp_path / "b"
    pipeline = _pipeline(input_glob, tok_path, other)
    pipeline.batch_bytes = 16 << 10
    pipeline.run(executor="local", progress=False)
    assert _pack_files(other) == files


def test_truncate_cuts_long_sequences_and_removes_long_prompts(input_glob, tok_path, tok, shards,
                                                               tmp_path):
    out = tmp_path / "t"
    _pipeline(input_glob, tok_path, out, truncate=True).run(executor="local", progress=False)
    stage = assert_accounting(out)["stages"][1]
    truncated = removed = 0
    for s, part in enumerate(shards):
        expected, reasons = _expected(part, tok, truncate=True)
        got, _ = _read_packs(part_files(out / "pack", ".idx.parquet")[s])
        assert got == Counter({k[:2]: n for k, n in expected.items()}), s
        assert reasons[f"long-prompt-{s}"] == PROMPT_REASON
        assert (tuple(tok.encode(part[7]["input"])) + tuple(tok.encode(part[7]["output"])))[
            : PACK_SIZE + 1] in {k[0] for k in got}  # the long answer: cut, kept, no EOD
        truncated += sum(n for k, n in expected.items() if k[2])
        removed += len(reasons)
    assert stage["truncated"] == truncated >= N_SHARDS
    assert stage["removed"] == removed and stage["removed_by_reason"][EMPTY_REASON] == N_SHARDS
    assert stage["truncated_tokens"] > 0


def test_plain_packing_without_prompt_or_eod(input_glob, tok_path, tok, shards, tmp_path):
    out = tmp_path / "p"
    _pipeline(input_glob, tok_path, out, prompt_field=None, append_eod=False).run(
        executor="local", progress=False)
    for s, part in enumerate(shards):
        expected, _ = _expected(part, tok, prompt=False, eod=False)
        got, _ = _read_packs(part_files(out / "pack", ".idx.parquet")[s])
        assert got == Counter({k[:2]: n for k, n in expected.items()}), s


def test_yaml_config_and_the_checks_it_gets(input_glob, tok_path, tmp_path):
    text = f"""
name: sft
output: {tmp_path / "y"}
stages:
  - {{type: read_jsonl, path: "{input_glob}", text_field: output}}
  - type: pack
    tokenizer: {tok_path}
    pack_size: 4096
    prompt_field: input
    truncate: true
"""
    stage = parse_pipeline(text).stages[1]
    assert isinstance(stage, Pack) and (stage.pack_size, stage.truncate) == (4096, True)
    for size in (1000, 0, -128):
        with pytest.raises(ValidationError, match="not a multiple of 128"):
            Pack(tokenizer=tok_path, pack_size=size)
    with pytest.raises(ValidationError, match="does not exist"):
        Pack(tokenizer=str(tmp_path / "missing.json"), pack_size=128)


def test_missing_columns_and_null_prompts_fail_their_rows(tok_path, tmp_path):
    docs = [{"id": "a", "input": "What is 2 + 2?\n", "output": "4"},
            {"id": "b", "input": None, "output": "5"},
            {"id": "c", "input": "Name a colour.\n", "output": "blue"}]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    out = tmp_path / "n"
    _pipeline(str(path), tok_path, out).run(executor="local", progress=False)
    stage = assert_accounting(out)["stages"][1]
    assert (stage["kept"], stage["failed"], stage["packs"]) == (2, 1, 1)
    errors = [json.loads(line) for line in part_files(out / "errors" / "pack", ".jsonl")[0]
              .read_text().splitlines()]
    assert [(e["id"], e["error"]) for e in errors] == [
        ("b", "field 'input' (prompt_field) is null")]

    out = tmp_path / "m"
    _pipeline(str(path), tok_path, out, text_field="output").run(executor="local",
                                                                  progress=False)
    stage = assert_accounting(out)["stages"][1]
    assert (stage["failed"], stage["packs"], stage["warnings"]) == (3, 0,
                                                                  ["no packs were written"])
    error = json.loads(part_files(out / "errors" / "pack", ".jsonl")[0].read_text().splitlines()[0])
    assert "no column 'output' (text_field)" in error["error"]
    assert "read into 'text'" in error["error"]


def test_process_hands_the_writer_its_sequences_with_the_rows(tok_path, tok):
    stage = Pack(tokenizer=tok_path, pack_size=128, prompt_field="input")
    table = pa.table({"id": ["x", "y"], "text": ["Four.", "Blue."],
                      "input": ["2 + 2?\n", "A colour?\n"]})
    seqs = stage.process(table).payload
    assert seqs.tokens.tolist() == [*tok.encode("2 + 2?\n"), *tok.encode("Four."), tok.eod_id,
                                    *tok.encode("A colour?\n"), *tok.encode("Blue."), tok.eod_id]
    halves = [stage.process(table.slice(0, 1)).payload, stage.process(table.slice(1)).payload]
    assert stage.join_payloads(halves).tokens.tolist() == seqs.tokens.tolist()
