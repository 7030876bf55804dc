"""The ``tokenize`` stage end to end: real sample text, a BPE trained here, a real Dask cluster,
and megatron-core itself reading what we wrote (IndexedDataset, get_blend_from_list, GPTDataset).
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator import Pipeline, ReadJsonl, Tokenize
from curator.config import ConfigError, load_pipeline, parse_pipeline
from curator.formats.megatron import TokenOutOfVocabError
from curator.report.html import render_html
from curator.stages.tokenize import EMPTY_REASON, SPLITS, split_of
from curator.tokenization.loading import Tokenizer, load_tokenizer
from curator.tokenization.training import train_bpe
from tests.conftest import ROOT, SAMPLE, assert_accounting, deal, write_parts
from tests.published import shard_parts

torch = pytest.importorskip("torch")
indexed_dataset = pytest.importorskip("megatron.core.datasets.indexed_dataset")

N_SHARDS = 3
EMPTY_IDS = [f"empty-{i}" for i in range(N_SHARDS)]


def _sample() -> list[dict]:
    docs = []
    for path in sorted(SAMPLE.glob("*.jsonl.gz")):
        lang = "ja" if path.name.startswith("aozora") else "en"
        with gzip.open(path, "rt", encoding="utf-8") as f:
            docs += [{"id": d["id"], "text": d["text"], "source": lang}
                     for d in map(json.loads, f)]
    return docs


@pytest.fixture(scope="module")
def input_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("input")


@pytest.fixture(scope="module")
def shards(input_dir) -> list[list[dict]]:
    """The bundled sample spread over three JSONL shards, with a source per document and one
    empty document per shard."""
    parts = deal(_sample(), N_SHARDS)
    for i, part in enumerate(parts):
        part.insert(5, {"id": EMPTY_IDS[i], "text": "", "source": "en"})
    write_parts(input_dir, parts)
    return parts


@pytest.fixture(scope="module")
def input_glob(shards, input_dir) -> str:
    return str(input_dir / "part-*.jsonl")


@pytest.fixture(scope="module")
def tok_path(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("tok")
    train_bpe(2000, files=sorted(SAMPLE.glob("*.jsonl.gz")), output=out)
    return str(out / "tokenizer.json")


@pytest.fixture(scope="module")
def tok(tok_path) -> Tokenizer:
    t = load_tokenizer(tok_path)
    assert (t.vocab_size, t.eod_id) == (2048, 0)
    return t


def _pipeline(input_glob: str, tok_path: str, output: Path, **params) -> Pipeline:
    stage = {"tokenizer": tok_path, "source_field": "source", "weights": {"en": 3, "ja": 7},
             "seq_length": 128, "max_shard_tokens": 150_000, "tensor_parallel_size": 3,
             **params}
    return Pipeline([ReadJsonl(path=input_glob), Tokenize(**stage)], name="tok",
                    output=str(output))


@pytest.fixture(scope="module")
def run_a(input_glob, tok_path, tmp_path_factory, dask_scheduler) -> Path:
    out = tmp_path_factory.mktemp("run") / "a"
    result = _pipeline(input_glob, tok_path, out).run(scheduler=dask_scheduler, progress=False)
    assert result.shards_run == N_SHARDS
    return out


def _token_files(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((run_dir / "tokens").iterdir())
            if p.suffix in (".bin", ".idx")}


def test_megatron_reads_every_shard_exactly(run_a, shards, tok, tok_path):
    """Re-encoded by the `tokenizers` library itself (the stage runs the tiktoken twin)."""
    library = load_tokenizer({"path": tok_path, "encoder": "native"})
    stats = assert_accounting(run_a)
    stage = stats["stages"][1]
    assert stage["removed_by_reason"] == {EMPTY_REASON: N_SHARDS}
    rejected = pq.read_table(run_a / "rejected" / "tokenize").column("id").to_pylist()
    assert sorted(rejected) == EMPTY_IDS

    tokens = run_a / "tokens"
    seen_docs = seen_tokens = 0
    names = [name.removeprefix("part-") for name in shard_parts(run_a)]
    for shard_index, part in enumerate(shards):
        for source in ("en", "ja"):
            texts = [d["text"] for d in part if d["source"] == source and d["text"]]
            expected = [[*ids, tok.eod_id] for ids in library.encode_batch(texts)]
            pieces = sorted(tokens.glob(
                f"tokenize_{source}_{names[shard_index]}_*_text_document.idx"))
            assert pieces, (source, shard_index)
            got = []
            for idx in pieces:
                ds = indexed_dataset.IndexedDataset(str(idx)[: -len(".idx")])
                assert ds.index.dtype == np.uint16
                assert list(ds.document_indices) == list(range(len(ds) + 1))
                assert ds.sequence_lengths.sum() <= 150_000 or len(ds) == 1  # the token budget
                got += [ds[i].tolist() for i in range(len(ds))]
            assert got == expected, (source, shard_index)
            seen_docs += len(got)
            seen_tokens += sum(map(len, got))
    assert len(list(tokens.glob("*.idx"))) > 2 * N_SHARDS  # the budget cut some shards in pieces
    assert not list(tokens.glob(".*.tmp"))
    assert (stage["documents"], stage["tokens"]) == (seen_docs, seen_tokens) == (
        stage["kept"], sum(e["tokens"] for e in stage["by_split"].values()))
    assert set(stage["by_source"]) == {"en", "ja"}
    assert stage["vocab_size"] == 2048 and stage["padded_vocab_size"] == 2304  # 128 x TP 3
    assert stage["encoders"] == ["tiktoken twin of tokenizer.json"]
    assert stage["by_split"]["train"]["samples_per_epoch"] == (seen_tokens - 1) // 128
    assert stage["warnings"] == []
    # the shard manifests carry the facts finalize() used
    manifests = sorted((run_a / "_manifests").rglob("part-*.json"))
    assert sum(json.loads(m.read_text())["sinks"]["tokenize"]["tokens"] for m in manifests) \
        == seen_tokens


def test_gpt_dataset_samples_our_blend(run_a, tok):
    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder,
    )
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.utils import get_blend_from_list

    from tests.io.test_megatron import _MegatronTok

    blend = json.loads((run_a / "tokens" / "blend.json").read_text())
    data_path = blend["splits"]["train"]["data_path"]
    assert blend["megatron_lm"].split()[1:] == data_path
    assert json.loads(blend["nemo2"][len("paths="):]) == data_path
    shares = {k: v["share"] for k, v in blend["splits"]["train"]["sources"].items()}
    assert shares == pytest.approx({"en": 0.3, "ja": 0.7})
    seqs = json.loads(Path(blend["per_dataset_sequences_path"]).read_text())
    assert len(seqs) == len(data_path) // 2

    prefixes, weights = get_blend_from_list(data_path)
    assert all(Path(p + ".bin").is_file() for p in prefixes)
    seq_length, n_samples = 128, 300
    config = GPTDatasetConfig(
        random_seed=1, sequence_length=seq_length, blend=(prefixes, weights), split="100,0,0",
        path_to_cache=None, tokenizer=_MegatronTok(tok).tok, reset_position_ids=False,
        reset_attention_mask=False, eod_mask_loss=False, create_attention_mask=False,
        sequences_per_dataset={k: tuple(v) for k, v in seqs.items()})
    train, _, _ = BlendedMegatronDatasetBuilder(GPTDataset, [n_samples, 0, 0], lambda: True,
                                                config).build()
    ja = {p for p, w in zip(prefixes, weights, strict=True) if "_ja_" in Path(p).name}
    from_ja = 0
    for i in range(n_samples):
        item = train[i]
        assert item["tokens"].shape == (seq_length,)
        assert int(item["tokens"].max()) < tok.vocab_size
        from_ja += train.datasets[train.dataset_index[i]].dataset_path in ja
    assert abs(from_ja / n_samples - 0.7) < 0.03


def test_rerun_gives_byte_identical_files(run_a, input_glob, tok_path, tmp_path,
                                          dask_scheduler):
    files = _token_files(run_a)
    blend = (run_a / "tokens" / "blend.json").read_text()
    # a run cut short: one shard's commit never happened, a half-written piece is left behind
    rerun = tmp_path / "a"
    shutil.copytree(run_a, rerun, ignore=shutil.ignore_patterns("cache"))
    part = shard_parts(rerun)[1]
    (rerun / "_manifests" / "segment-00" / f"{part}.json").unlink()
    shard = part.removeprefix("part-")
    for path in (rerun / "tokens").iterdir():
        if path.name.startswith(f"tokenize_en_{shard}_") and path.suffix in (".bin", ".idx"):
            path.unlink()
    (rerun / "tokens" / f".tokenize_en_{shard}_00000_text_document.bin.1-0.tmp").write_bytes(
        b"\0" * 99)
    result = _pipeline(input_glob, tok_path, rerun).run(scheduler=dask_scheduler, progress=False)
    assert (result.shards_run, result.shards_skipped) == (1, N_SHARDS - 1)
    assert _token_files(rerun) == files
    assert not list((rerun / "tokens").glob(".*.tmp"))
    assert (rerun / "tokens" / "blend.json").read_text() == blend.replace(str(run_a), str(rerun))
    # other batch sizes and another executor: the same bytes
    other = tmp_path / "b"
    pipeline = _pipeline(input_glob, tok_path, other)
    pipeline.batch_bytes = 64 << 10
    pipeline.run(executor="local", progress=False)
    assert _token_files(other) == files


def test_split_keep_empty_and_no_eod(input_glob, tok_path, tok, shards, tmp_path):
    fractions = {"train": 0.8, "valid": 0.1, "test": 0.1}
    out = tmp_path / "s"
    Pipeline([ReadJsonl(path=input_glob),
              Tokenize(tokenizer=tok_path, split=fractions, seed=3, keep_empty=True,
                       dataset_name="mix")], output=str(out)).run(executor="local",
                                                                  progress=False)
    stats = assert_accounting(out)["stages"][1]
    docs = [d for part in shards for d in part]
    assert stats["removed"] == 0 and stats["documents"] == len(docs)
    assigned = split_of([d["id"] for d in docs], fractions, 3)
    counts = {s: int((assigned == i).sum()) for i, s in enumerate(SPLITS)}
    assert {s: stats["by_split"][s]["documents"] for s in SPLITS} == counts
    assert all(counts.values())
    blend = json.loads((out / "tokens" / "blend.json").read_text())
    assert blend["megatron_lm"].startswith("--train-data-path ")
    assert "--valid-data-path " in blend["megatron_lm"] and "--test-data-path " in blend[
        "megatron_lm"]
    assert set(json.loads(blend["nemo2"][len("paths="):])) == {"train", "validation", "test"}
    # an empty document is kept as a lone end-of-document token
    lone = 0
    for idx in (out / "tokens").glob("mix_*_text_document.idx"):
        ds = indexed_dataset.IndexedDataset(str(idx)[: -len(".idx")])
        lone += sum(ds[i].tolist() == [tok.eod_id] for i in range(len(ds)))
    assert lone == len(EMPTY_IDS)

    # append_eod: false writes the bare ids
    out2 = tmp_path / "n"
    Pipeline([ReadJsonl(path=input_glob), Tokenize(tokenizer=tok_path, append_eod=False)],
             output=str(out2)).run(executor="local", progress=False)
    first = [d["text"] for d in shards[0] if d["text"]]
    first_part = shard_parts(out2)[0].removeprefix("part-")
    ds = indexed_dataset.IndexedDataset(
        str(out2 / "tokens" / f"tokenize_{first_part}_00000_text_document"))
    assert [ds[i].tolist() for i in range(len(ds))] == tok.encode_batch(first)


def test_token_outside_vocabulary_stops_the_run(input_glob, tok_path, tmp_path, monkeypatch):
    monkeypatch.setattr(Tokenizer, "vocab_size", property(lambda self: 1000))
    out = tmp_path / "oov"
    pipeline = Pipeline([ReadJsonl(path=input_glob),
                         Tokenize(tokenizer=tok_path, dataset_name="oov")], output=str(out))
    with pytest.raises(TokenOutOfVocabError, match=r"outside the vocabulary \[0, 1000\).*"
                       r"misconfigured"):
        pipeline.run(executor="local", progress=False)
    assert not list((out / "_manifests").rglob("part-*.json"))
    assert not list((out / "tokens").glob("*.idx"))


def test_config_errors_name_the_rule(tok_path):
    text = f"""name: t
stages:
  - {{type: read_jsonl, path: "x/*.jsonl"}}
  - type: tokenize
    tokenizer: {tok_path}
    seq_length: 1000
"""
    with pytest.raises(ConfigError) as err:
        parse_pipeline(text, "tok.yaml")
    message = str(err.value)
    assert message.startswith("tok.yaml:6: ")
    assert "seq_length 1000 is not a multiple of 128" in message and "896 or 1024" in message
    for bad, expected in [("split: {train: 0.5, valid: 0.2}", "sum to 1"),
                          ("weights: {en: -1}", "non-negative"),
                          ("dataset_name: a/b", "letters, digits")]:
        with pytest.raises(ConfigError, match=expected):
            parse_pipeline(text.replace("seq_length: 1000", bad), "tok.yaml")
    with pytest.raises(ConfigError, match="does not exist"):  # a key may appear once
        parse_pipeline(text.replace("seq_length: 1000", "seq_length: 1024").replace(
            f"tokenizer: {tok_path}", "tokenizer: /nonexistent/tokenizer.json"), "tok.yaml")
    assert parse_pipeline(text.replace("1000", "1024")).stages[1].seq_length == 1024


def test_cli_trains_a_tokenizer_on_run_output(tmp_path):
    from typer.testing import CliRunner

    from curator.cli import app

    docs = _sample()[::6]
    folder = tmp_path / "write_parquet"
    folder.mkdir()
    pq.write_table(pa.table({"id": [d["id"] for d in docs], "body": [d["text"] for d in docs]}),
                   folder / "part-00000.parquet")
    out = tmp_path / "tok"
    result = CliRunner().invoke(app, ["tokenizer", "train", str(folder / "*.parquet"),
                                      "--vocab-size", "300", "--output", str(out),
                                      "--text-field", "body"])
    assert result.exit_code == 0, result.output
    t = load_tokenizer(out)
    assert (t.vocab_size, t.eod_id) == (384, 0)  # rounded up to a multiple of 128
    assert t.decode(t.encode(docs[0]["text"])) == docs[0]["text"]
    missing = CliRunner().invoke(app, ["tokenizer", "train", str(tmp_path / "nope"),
                                       "--vocab-size", "300", "--output", str(out)])
    assert missing.exit_code == 2


def test_demo_pipeline_validates(tok_path):
    path = ROOT / "pipelines" / "tokenize.yaml"
    pipeline = load_pipeline(path, [f"tokenize.tokenizer={tok_path}"])
    stage = pipeline.stages[-1]
    assert isinstance(stage, Tokenize) and stage.seq_length % 128 == 0
    with pytest.raises(ConfigError, match="seq_length 1000"):
        load_pipeline(path, [f"tokenize.tokenizer={tok_path}", "tokenize.seq_length=1000"])


def test_seeded_shuffle_permutes_documents_deterministically(input_glob, tok_path, tmp_path):
    def read_all(out: Path) -> list[list[list[int]]]:
        pieces = []
        for idx in sorted((out / "tokens").glob("*_text_document.idx")):
            ds = indexed_dataset.IndexedDataset(str(idx)[: -len(".idx")])
            pieces.append([ds[i].tolist() for i in range(len(ds))])
        return pieces

    runs = {}
    for label, params in {"plain": {}, "a": {"shuffle": True, "seed": 5},
                          "b": {"shuffle": True, "seed": 5}, "c": {"shuffle": True, "seed": 6}
                          }.items():
        out = tmp_path / label
        Pipeline([ReadJsonl(path=input_glob), Tokenize(tokenizer=tok_path, **params)],
                 output=str(out)).run(executor="local", progress=False)
        runs[label] = read_all(out)
    assert runs["a"] == runs["b"], "same seed, same order"
    assert runs["a"] != runs["plain"] and runs["a"] != runs["c"]
    for plain, shuffled in zip(runs["plain"], runs["a"], strict=True):
        assert sorted(plain) == sorted(shuffled), "a permutation: no document lost or added"


# ----------------------------------------------------------------------------- issue 29, defect 7
def _blend_sources(run: Path) -> dict[str, list[str]]:
    blend = json.loads((run / "tokens" / "blend.json").read_text())["splits"]["train"]["sources"]
    return {s: [Path(p["prefix"]).name for p in blend[s]["shards"]] for s in blend}


def _two_sources(tmp_path: Path) -> tuple[Path, Path]:
    """Speeches and Aozora works in two folders of two shards each (no source column)."""
    docs = _sample()
    en, ja = tmp_path / "en", tmp_path / "ja"
    for folder, lang in ((en, "en"), (ja, "ja")):
        folder.mkdir()
        write_parts(folder, deal([{"id": d["id"], "text": d["text"]} for d in docs
                                  if d["source"] == lang], 2))
    return en, ja


def _token_names(run: Path) -> list[str]:
    """One Megatron prefix per input shard (its part name in it), in input order."""
    return [f"tokenize_{part.removeprefix('part-')}_00000_text_document"
            for part in shard_parts(run)]


def test_several_sources_get_one_blend_entry_each_by_default(tok_path, tmp_path):
    """Defect 7: without `source_field` a pipeline reading several sources wrote one blend entry
    for all of them; now one per source, as with `source_field: source`, the files named as
    before."""
    en, ja = _two_sources(tmp_path)
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=f"{en}/*.jsonl", source="speeches"),
              ReadJsonl(path=f"{ja}/*.jsonl", name="aozora"),
              Tokenize(tokenizer=tok_path)], output=str(run)).run(executor="local",
                                                                  progress=False)
    names = _token_names(run)
    assert _blend_sources(run) == {
        "speeches": [n for n in names if n.startswith("tokenize_read_jsonl_")],
        "aozora": [n for n in names if n.startswith("tokenize_aozora_")]}
    assert len(names) == 4
    stage = json.loads((run / "stats.json").read_text())["stages"][-1]
    assert set(stage["by_source"]) == {"speeches", "aozora"}
    # '' keeps one entry whatever the sources
    merged = tmp_path / "merged"
    Pipeline([ReadJsonl(path=f"{en}/*.jsonl", source="speeches"),
              ReadJsonl(path=f"{ja}/*.jsonl", name="aozora"),
              Tokenize(tokenizer=tok_path, source_field="")], output=str(merged)).run(
        executor="local", progress=False)
    assert _blend_sources(merged) == {"tokenize": sorted(_token_names(merged))}


def test_one_source_keeps_one_entry_named_after_the_dataset(tok_path, tmp_path):
    en, ja = _two_sources(tmp_path)
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=[f"{en}/*.jsonl", f"{ja}/*.jsonl"]),
              Tokenize(tokenizer=tok_path)], output=str(run)).run(executor="local",
                                                                  progress=False)
    assert _blend_sources(run) == {"tokenize": sorted(_token_names(run))}
    assert len(_token_names(run)) == 4


def test_group_by_language_and_quality_weighs_each_group_and_megatron_reads_it(tok_path, tok,
                                                                                tmp_path):
    """group_by [lang, quality] with repeats: one blend entry per (language, quality) present,
    weight = its tokens x its repeat factor (epochs = the factor), and megatron-core's blended
    builder samples the groups in those shares."""
    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder,
    )
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.utils import get_blend_from_list

    from tests.io.test_megatron import _MegatronTok

    levels = ["high", "medium", "low"]
    docs = [{"id": d["id"], "text": d["text"], "lang": d["source"],
             "quality": levels[k % 3] if k % 7 else None} for k, d in enumerate(_sample())]
    (tmp_path / "in").mkdir()
    write_parts(tmp_path / "in", deal(docs, 3))
    repeats = {"en/high": 3.0, "ja/high": 2.0, "en/none": 0.0}
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=str(tmp_path / "in" / "part-*.jsonl")),
              Tokenize(tokenizer=tok_path, group_by=["lang", "quality"], repeats=repeats,
                       seq_length=128)], output=str(run)).run(executor="local", progress=False)
    stage = json.loads((run / "stats.json").read_text())["stages"][-1]
    tokens = {g: v["train"]["tokens"] for g, v in stage["by_source"].items()}
    present = {f"{d['lang']}/{d['quality'] or 'none'}" for d in docs if d["text"]}
    assert set(tokens) == present and len(present) == 8
    weights = {g: n * repeats.get(g, 1.0) for g, n in tokens.items() if repeats.get(g, 1.0)}
    blend = json.loads((run / "tokens" / "blend.json").read_text())
    sources = blend["splits"]["train"]["sources"]
    assert set(sources) == set(weights)  # en/none repeated 0 times: left out
    total = sum(weights.values())
    assert {g: s["share"] for g, s in sources.items()} == pytest.approx(
        {g: w / total for g, w in weights.items()})
    assert stage["epochs"] == pytest.approx({g: repeats.get(g, 1.0) for g in weights}, rel=1e-3)

    prefixes, shares = get_blend_from_list(blend["splits"]["train"]["data_path"])
    seqs = json.loads(Path(blend["per_dataset_sequences_path"]).read_text())
    config = GPTDatasetConfig(
        random_seed=1, sequence_length=128, blend=(prefixes, shares), split="100,0,0",
        path_to_cache=None, tokenizer=_MegatronTok(tok).tok, reset_position_ids=False,
        reset_attention_mask=False, eod_mask_loss=False, create_attention_mask=False,
        sequences_per_dataset={k: tuple(v) for k, v in seqs.items()})
    n_samples = 400
    train, _, _ = BlendedMegatronDatasetBuilder(GPTDataset, [n_samples, 0, 0], lambda: True,
                                                config).build()
    group_of = {s["prefix"]: g for g, e in sources.items() for s in e["shards"]}
    drawn = {g: 0 for g in sources}
    for i in range(n_samples):
        drawn[group_of[train.datasets[train.dataset_index[i]].dataset_path]] += 1
    for group, entry in sources.items():
        assert abs(drawn[group] / n_samples - entry["share"]) < 0.02, (group, drawn)


SIZES = [1] * 12 + [2] * 4 + [3] * 3 + [4] * 3 + [5] * 2 + [7, 99, 100, 101]


def _chunks() -> list[str]:
    """Distinct passages of the sample (400 characters each), for clusters of copies."""
    chunks = []
    for d in _sample():
        text = " ".join(d["text"].split())
        chunks += [text[k:k + 400] for k in range(0, len(text) - 400, 4000)]
    return chunks


def test_rehydrated_documents_are_written_as_often_as_the_schedule_says(tok_path, tok, tmp_path):
    """Planted clusters of copies (sizes 1 to 101) through fuzzy_dedup → rehydrate (FineWeb-2's
    schedule) → tokenize(repeat_field): every kept document's tokens are in the Megatron shards
    exactly schedule(cluster size) times, in a row; megatron-core reads them."""
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    from curator import FuzzyDedup, Rehydrate

    chunks = _chunks()
    assert len(chunks) >= len(SIZES)
    docs = [{"id": f"c{c:03d}-{k:03d}", "text": chunks[c]}
            for c, size in enumerate(SIZES) for k in range(size)]
    (tmp_path / "in").mkdir()
    write_parts(tmp_path / "in", deal(docs, 3))
    run = tmp_path / "run"
    rehydrate = Rehydrate()
    Pipeline([ReadJsonl(path=str(tmp_path / "in" / "part-*.jsonl")),
              FuzzyDedup(buckets=3, device="cpu"), rehydrate,
              Tokenize(tokenizer=tok_path, repeat_field="repeats")],
             output=str(run)).run(executor="local", progress=False)
    assert_accounting(run)
    want = {tuple(tok.encode_batch([chunks[c]])[0]): int(rehydrate.repeats(np.array([s]))[0])
            for c, s in enumerate(SIZES)}
    assert sorted(want.values()) == sorted([1] * 12 + [2] * 4 + [3] * 6 + [5] * 4 + [8] * 2)
    seen: list[tuple[int, ...]] = []
    for prefix in sorted({p.with_suffix("") for p in (run / "tokens").glob("*.bin")}):
        ds = IndexedDataset(str(prefix))
        seen += [tuple(int(t) for t in ds[i][:-1]) for i in range(len(ds))]  # EOD dropped
    assert {doc: seen.count(doc) for doc in want} == want
    assert len(seen) == sum(want.values())
    runs = [k for k in range(1, len(seen)) if seen[k] != seen[k - 1]]
    assert len(runs) + 1 == len(want)  # each document's copies are consecutive
    stage = json.loads((run / "stats.json").read_text())["stages"][-1]
    assert stage["repeated"]["copies"] == sum(want.values()) - len(want)
    page = render_html(json.loads((run / "stats.json").read_text()))
    assert f"rehydration wrote {stage['repeated']['copies']:,} extra copies" in page


def test_rehydrate_schedule_is_fineweb2_s():
    from curator import Rehydrate

    sizes = np.arange(0, 2500)
    got = Rehydrate().repeats(sizes)
    want = [1 if s <= 1 else s if s <= 3 else 3 if s == 4 else 5 if s < 100 else 8 if s < 1000
            else 1 for s in sizes]
    assert got.tolist() == want
