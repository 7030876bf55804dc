"""Runtime v2 contracts: one context per writer, fingerprints that see defaults and code
versions, several sources, resource cuts in the plan, filter signals apart from decisions."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pydantic import Field

from curator import (
    DatasetResult,
    DatasetStage,
    Decisions,
    Filter,
    LengthFilter,
    Pipeline,
    ReadJsonl,
    WriteParquet,
)
from curator.stages.base import STAGES
from curator.tokenization.training import train_bpe
from tests.conftest import assert_accounting, sample_documents, write_parts
from tests.published import part_files, published_differences


@pytest.fixture(scope="module")
def two_dumps(tmp_path_factory) -> tuple[Path, Path]:
    """Real documents split into an English and a Japanese dump, two files each."""
    root = tmp_path_factory.mktemp("dumps")
    docs = sample_documents()
    en = [{"id": d["id"], "text": d["text"]} for d in docs if d["text"].count(" ") > 50]
    ja = [{"id": d["id"], "text": d["text"]} for d in docs if d["text"].count(" ") <= 50]
    (root / "en").mkdir()
    (root / "ja").mkdir()
    write_parts(root / "en", [en[0::2], en[1::2]])
    write_parts(root / "ja", [ja[0::2], ja[1::2]])
    return root / "en", root / "ja"


def test_each_writer_of_a_segment_writes_under_its_own_name(tmp_path, two_dumps):
    """read_jsonl → pack → write_parquet: pack's files under pack/, never under write_parquet/."""
    from curator.stages.pack import Pack

    en, _ = two_dumps
    tok = tmp_path / "tok"
    train_bpe(512, texts=[d["text"][:2000] for d in sample_documents()[:20]], output=tok)
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=f"{en}/*.jsonl"), Pack(tokenizer=str(tok / "tokenizer.json"),
                                                    pack_size=4096, truncate=True),
              WriteParquet()], output=str(run)).run(executor="local", progress=False)
    written = [p.name.removesuffix(".parquet") for p in part_files(run / "write_parquet")]
    packed = [p.name.removesuffix(".idx.parquet")
              for p in part_files(run / "pack", ".idx.parquet")]
    assert len(written) == 2 and packed == written
    assert sorted(p.name for p in (run / "write_parquet").iterdir()) == \
        [f"{name}.parquet" for name in written]
    assert pq.read_table(run / "write_parquet").num_rows > 0


def _probe_class(default: int, version: int) -> type[Filter]:
    """A stage as one release of a package would define it (same type, another default)."""

    class Probe(Filter):
        type = "fingerprint_probe"
        version: ClassVar[int] = 1
        limit: int = Field(default, description="Fewer characters are removed.")

        def reasons(self, batch: pa.Table) -> pa.Array:
            short = pc.less(pc.utf8_length(batch.column("text")), self.limit)
            return pc.if_else(short, "short", pa.scalar(None, pa.string()))

    Probe.version = version
    return Probe


@pytest.mark.parametrize("upgrade", [{"default": 6, "version": 1}, {"default": 5, "version": 2}])
def test_an_upgrade_that_changes_a_default_or_the_code_is_recomputed(tmp_path, two_dumps,
                                                                      upgrade):
    """A run reuses a shard only under the key the new code computes: a changed default or
    code version runs every shard again, and the output is the new code's."""
    en, _ = two_dumps
    config = f"""
name: probe
stages:
  - {{type: read_jsonl, path: "{en}/*.jsonl"}}
  - {{type: fingerprint_probe}}
  - {{type: write_parquet}}
"""
    try:
        _probe_class(5, 1)
        Pipeline.from_yaml(config).run(output=tmp_path / "run", executor="local", progress=False)
        _probe_class(**upgrade)
        again = Pipeline.from_yaml(config).run(output=tmp_path / "run", executor="local",
                                               progress=False)
        assert again.shards_skipped == 0 and again.shards_run == len(list(en.glob("*.jsonl")))
        Pipeline.from_yaml(config).run(output=tmp_path / "scratch", executor="local",
                                       progress=False)
        assert published_differences(tmp_path / "run", tmp_path / "scratch") == []
    finally:
        STAGES.pop("fingerprint_probe", None)


def test_placement_does_not_change_the_fingerprint():
    from curator import FuzzyDedup

    a = Pipeline([ReadJsonl(path="x"), FuzzyDedup(device="cpu")])
    b = Pipeline([ReadJsonl(path="x"), FuzzyDedup(device="auto")])
    c = Pipeline([ReadJsonl(path="x"), FuzzyDedup(device="cpu", threshold=0.7)])
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


def test_two_sources_feed_one_output_with_their_source_and_tokens_per_source(tmp_path,
                                                                            two_dumps):
    from curator import Tokenize

    en, ja = two_dumps
    tok = tmp_path / "tok"
    train_bpe(512, texts=[d["text"][:2000] for d in sample_documents()], output=tok)
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=f"{en}/*.jsonl", source="speeches"),
              ReadJsonl(path=f"{ja}/*.jsonl", name="aozora"),
              LengthFilter(min_chars=100), WriteParquet(),
              Tokenize(tokenizer=str(tok / "tokenizer.json"), source_field="source")],
             output=str(run)).run(executor="dask", workers=2, progress=False)
    expected = {}
    for folder, source in ((en, "speeches"), (ja, "aozora")):
        for path in sorted(folder.glob("*.jsonl")):
            for line in path.read_text().splitlines():
                doc = json.loads(line)
                if len(doc["text"]) >= 100:
                    expected[doc["id"]] = source
    table = pq.read_table(run / "write_parquet")
    assert dict(zip(table.column("id").to_pylist(), table.column("source").to_pylist(),
                    strict=True)) == expected
    # each shard's part is named after the source stage that listed it, and holds its documents
    for part in part_files(run / "write_parquet"):
        stage = "aozora" if part.name.startswith("part-aozora_") else "read_jsonl"
        assert part.name.startswith(f"part-{stage}_")
        assert set(pq.read_table(part).column("source").to_pylist()) == {
            "aozora" if stage == "aozora" else "speeches"}
    stats = json.loads((run / "stats.json").read_text())
    by_name = {s["name"]: s for s in stats["stages"]}
    assert by_name["read_jsonl"]["kept"] + by_name["aozora"]["kept"] == \
        by_name["length_filter"]["in"]
    tokens = by_name["tokenize"]
    assert set(tokens["by_source"]) == {"speeches", "aozora"}
    blend = json.loads((run / "tokens" / "blend.json").read_text())["splits"]["train"]["sources"]
    assert {s: [Path(p["prefix"]).name for p in blend[s]["shards"]] for s in blend} == {
        source: [f"tokenize_{source}_{p.stem.removeprefix('part-')}_00000_text_document"
                 for p in part_files(run / "write_parquet") if p.name.startswith(f"part-{stage}_")]
        for source, stage in (("speeches", "read_jsonl"), ("aozora", "aozora"))}
    assert blend["speeches"]["weight"] > 0 and blend["aozora"]["weight"] > 0


def test_documents_that_carry_a_source_keep_it(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    write_parts(folder, [[{"id": "a", "text": "x", "source": "wiki"}, {"id": "b", "text": "y"}]])
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=f"{folder}/*.jsonl", source="dump"), WriteParquet()],
             output=str(run)).run(executor="local", progress=False)
    assert pq.read_table(run / "write_parquet").column("source").to_pylist() == ["wiki", "dump"]


class _GpuProbe(Filter):
    type = "gpu_probe_filter"

    def resources(self) -> dict[str, float]:
        return {"GPU": 1}


def test_a_gpu_stage_gets_its_own_segment():
    plan = Pipeline([ReadJsonl(path="x"), LengthFilter(), _GpuProbe(), LengthFilter(),
                     WriteParquet()]).plan()
    assert [[name for name, _ in s.stages] for s in plan.segments] == [
        ["read_jsonl", "length_filter"], ["gpu_probe_filter"], ["length_filter_2",
                                                                "write_parquet"]]
    assert [s.holds_gil() for s in plan.segments] == [False, True, False]


def test_filter_signals_are_kept_counted_and_histogrammed(tmp_path, two_dumps):
    en, ja = two_dumps
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=[f"{en}/*.jsonl", f"{ja}/*.jsonl"]),
              LengthFilter(min_chars=3000, max_chars=20000, keep_scores=True), WriteParquet()],
             output=str(run)).run(executor="local", progress=False)
    docs = [json.loads(line) for folder in (en, ja) for p in sorted(folder.glob("*.jsonl"))
            for line in p.read_text().splitlines()]
    lengths = {d["id"]: len(d["text"]) for d in docs}
    out = pq.read_table(run / "write_parquet")
    assert dict(zip(out.column("id").to_pylist(), out.column("chars").to_pylist(),
                    strict=True)) == {i: n for i, n in lengths.items() if 3000 <= n <= 20000}
    stats = assert_accounting(run)
    entry = stats["stages"][1]
    assert entry["rules"] == {"too_short": sum(n < 3000 for n in lengths.values()),
                              "too_long": sum(n > 20000 for n in lengths.values())}
    histogram = entry["histograms"]["chars"]
    assert sum(histogram["counts"]) == len(docs)
    assert len(histogram["edges"]) == len(histogram["counts"]) + 1
    report = (run / "report.html").read_text()
    assert "Filter signals" in report and 'aria-label="chars"' in report
    assert f"too_short: {entry['rules']['too_short']:,}" in report


class _Blocklist(DatasetStage):
    """A third-party barrier: removes the documents whose ids a side file lists."""

    type = "blocklist_probe"
    holds_gil: ClassVar[bool] = True

    path: str

    def run_dataset(self, parts: list[Path], ctx) -> DatasetResult:
        listed = ctx.side_input(self.path)
        return DatasetResult(*ctx.remove(parts, _Listed(tuple(listed.read_text().split()))))


@dataclass(frozen=True)
class _Listed:
    ids: tuple[str, ...]

    def __call__(self, part: int, table: pa.Table) -> Decisions:
        hit = pc.is_in(table.column("id"), pa.array(self.ids)).to_numpy(zero_copy_only=False)
        return Decisions(hit, "blocklisted", columns={"part_seen": pa.array([part] *
                                                                           table.num_rows)})


def test_a_dataset_stage_removes_through_the_shared_phase_with_a_side_input(tmp_path,
                                                                           two_dumps):
    en, _ = two_dumps
    ids = [json.loads(line)["id"] for p in sorted(en.glob("*.jsonl"))
           for line in p.read_text().splitlines()]
    blocked = ids[::7]
    listing = tmp_path / "blocked.txt"
    listing.write_text("\n".join(blocked))
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=f"{en}/*.jsonl"), _Blocklist(path=str(listing)), WriteParquet()],
             output=str(run), rejected="documents").run(executor="dask", workers=2,
                                                        progress=False)
    out = pq.read_table(run / "write_parquet")
    assert sorted(out.column("id").to_pylist()) == sorted(set(ids) - set(blocked))
    assert set(out.column("part_seen").to_pylist()) == {0, 1}
    gone = pq.read_table(run / "rejected" / "blocklist_probe")
    assert sorted(gone.column("id").to_pylist()) == sorted(blocked)
    assert set(gone.column("reason").to_pylist()) == {"blocklisted"}
    assert "text" in gone.column_names  # rejected: documents keeps them whole
    stats = assert_accounting(run)
    assert stats["stages"][1]["removed_by_reason"] == {"blocklisted": len(blocked)}
