"""YAML and Python are two spellings of one pipeline; config errors say where and what."""

from __future__ import annotations

import pytest

from curator import LengthFilter, Pipeline, ReadJsonl, Sample, WriteJsonl, WriteParquet
from curator.config import ConfigError, load_pipeline, parse_pipeline

GOOD = """\
name: demo
output: runs/demo
executor: {type: dask, workers: 2}
stages:
  - {type: read_jsonl, path: "data/*.jsonl.gz", text_field: body}
  - type: length_filter
    name: lengths
    min_chars: 200
  - {type: sample, fraction: 0.5}
  - {type: write_parquet}
"""


def test_python_pipeline_round_trips_through_yaml():
    pipeline = Pipeline(
        [ReadJsonl(path=["a/*.jsonl", "b.jsonl.zst"], id_field="doc_id"),
         LengthFilter(min_chars=10, max_chars=10_000), LengthFilter(name="strict", min_chars=50),
         Sample(fraction=0.25, seed=9), WriteJsonl(compression="zstd"), WriteParquet()],
        name="rt", output="runs/rt", on_error="fail", rejected="documents", batch_bytes=1 << 20)
    text = pipeline.to_yaml()
    again = Pipeline.from_yaml(text)
    assert again == pipeline
    assert again.to_yaml() == text
    assert again.stage_names() == ["read_jsonl", "length_filter", "strict", "sample",
                                   "write_jsonl", "write_parquet"]


def test_yaml_file_loads_with_names_defaults_and_overrides(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(GOOD)
    pipeline = load_pipeline(path, ["lengths.min_chars=300", "sample.seed=4"])
    assert pipeline.stages[1].min_chars == 300
    assert pipeline.stages[2].seed == 4
    assert pipeline.stages[0].text_field == "body"
    assert pipeline.executor.workers == 2


def test_misspelled_parameter_names_file_line_stage_and_suggestion(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(GOOD.replace("    min_chars: 200", "    min_chras: 200"))
    with pytest.raises(ConfigError) as err:
        load_pipeline(path)
    assert str(err.value) == (f"{path}:8: unknown parameter 'min_chras' for stage 'lengths'; "
                              "did you mean 'min_chars'?")


def test_unknown_stage_type_suggests_the_closest():
    with pytest.raises(ConfigError, match=r"x.yaml:3: unknown stage type 'lenght_filter'; "
                                          r"did you mean 'length_filter'\?"):
        parse_pipeline("stages:\n  - {type: read_jsonl, path: a}\n  - {type: lenght_filter}\n",
                       "x.yaml")


def test_wrong_value_type_names_the_parameter_and_the_value():
    text = "stages:\n  - {type: read_jsonl, path: a}\n  - {type: sample, fraction: lots}\n"
    with pytest.raises(ConfigError, match=r"x.yaml:3: stage 'sample' \(sample\), parameter "
                                          r"'fraction': .*number.*'lots'"):
        parse_pipeline(text, "x.yaml")


def test_missing_required_parameter():
    with pytest.raises(ConfigError, match=r"x.yaml:2: stage 'read_jsonl' \(read_jsonl\) needs "
                                          r"parameter 'path'"):
        parse_pipeline("stages:\n  - {type: read_jsonl}\n", "x.yaml")


def test_malformed_yaml_names_the_line():
    with pytest.raises(ConfigError, match=r"x.yaml:3: malformed YAML"):
        parse_pipeline("stages:\n  - {type: read_jsonl, path: a\n  - {type: sample}\n", "x.yaml")


def test_unknown_top_level_key_and_bad_set():
    with pytest.raises(ConfigError, match=r"x.yaml:1: unknown key 'ouput'; did you mean 'output'"):
        parse_pipeline("ouput: r\nstages:\n  - {type: read_jsonl, path: a}\n", "x.yaml")
    with pytest.raises(ConfigError, match=r"no stage named 'lenghts'.*did you mean 'lengths'"):
        parse_pipeline(GOOD, "x.yaml", ["lenghts.min_chars=3"])


def test_first_stage_must_read():
    with pytest.raises(ConfigError, match=r"first stage must read input"):
        parse_pipeline("stages:\n  - {type: sample, fraction: 0.5}\n", "x.yaml")


def test_plan_fuses_per_batch_stages_into_one_segment():
    plan = parse_pipeline(GOOD).plan()
    assert len(plan.segments) == 1
    assert [name for name, _ in plan.segments[0].stages] == ["read_jsonl", "lengths", "sample",
                                                              "write_parquet"]
    assert "one task per shard" in str(plan)
