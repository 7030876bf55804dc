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


# ---------------------------------------------------------------- YAML read safely (issue 29, 27)
def test_a_duplicate_key_names_the_file_the_line_and_the_key():
    text = ("stages:\n  - {type: read_jsonl, path: a}\n  - type: length_filter\n"
            "    min_chars: 10\n    min_chars: 999999\n")
    with pytest.raises(ConfigError) as err:
        parse_pipeline(text, "x.yaml")
    assert str(err.value) == ("x.yaml:5: duplicate key 'min_chars' (first on line 4): each key "
                              "may appear once in a mapping")
    with pytest.raises(ConfigError, match=r"x.yaml:2: duplicate key 'stages'"):
        parse_pipeline("stages: []\nstages: [{type: read_jsonl, path: a}]\n", "x.yaml")


def test_anchors_and_merge_keys_within_the_bound_still_work():
    text = ("stages:\n  - &read {type: read_jsonl, path: a}\n  - {<<: *read, name: again, "
            "path: b}\n  - {type: length_filter, min_chars: 3}\n")
    pipeline = parse_pipeline(text, "x.yaml")
    assert [s.path for s in pipeline.stages[:2]] == ["a", "b"]
    assert pipeline.stage_names()[:2] == ["read_jsonl", "again"]


def test_colon_numbers_stay_strings_and_numbers_stay_numbers():
    """YAML 1.1 reads 5:8 as base 60 (308); here, as in YAML 1.2, it is a string."""
    text = ("stages:\n  - {type: read_jsonl, path: a, text_field: 5:8, id_field: 1:02:03}\n"
            "  - {type: sample, fraction: 0.5, seed: 0x10}\n  - {type: length_filter, "
            "min_chars: 1_000, max_chars: +2_000_000}\n")
    pipeline = parse_pipeline(text, "x.yaml", ["sample.name=5:8"])
    read, sample, lengths = pipeline.stages
    assert (read.text_field, read.id_field) == ("5:8", "1:02:03")
    assert (sample.name, sample.fraction, sample.seed) == ("5:8", 0.5, 16)
    assert (lengths.min_chars, lengths.max_chars) == (1000, 2_000_000)


def test_a_billion_laughs_is_measured_never_expanded():
    anchors = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'] + [
        f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    text = "\n".join(anchors) + "\nstages: [{type: read_jsonl, path: a}]\n"  # unknown keys too
    with pytest.raises(ConfigError, match=r"^x.yaml:1: aliases \(\*name\) expand the document "
                                          r"by [\d,]+ nodes; at most 100,000 are read$"):
        parse_pipeline(text, "x.yaml")


def test_deep_or_self_containing_yaml_is_one_error():
    with pytest.raises(ConfigError, match=r"^x.yaml:1: collections nested more than 64 deep$"):
        parse_pipeline("stages: " + "[" * 50_000 + "]" * 50_000, "x.yaml")
    chain = "".join(f"l{i}: &l{i} [*l{i - 1}]\n" for i in range(1, 80))
    with pytest.raises(ConfigError, match=r"nested more than 64 deep \(aliases followed\)"):
        parse_pipeline("l0: &l0 [x]\n" + chain + "stages: [*l79]\n", "x.yaml")
    with pytest.raises(ConfigError, match=r"^x.yaml:1: an alias refers to a collection that "
                                          r"contains it$"):
        parse_pipeline("stages: &s [{type: read_jsonl, path: a}, *s]\n", "x.yaml")


def test_set_values_are_plain_yaml_and_their_errors_one_line():
    with pytest.raises(ConfigError, match=r"^--set 'sample.seed=!!python/object/apply:os.getpid "
                                          r"\[\]': could not determine a constructor"):
        parse_pipeline(GOOD, "x.yaml", ["sample.seed=!!python/object/apply:os.getpid []"])
    with pytest.raises(ConfigError, match=r"^--set 'sample.seed=\[1': malformed YAML"):
        parse_pipeline(GOOD, "x.yaml", ["sample.seed=[1"])
    with pytest.raises(ConfigError, match=r"^--set 'read_jsonl.path.x=1': 'path' is not a "
                                          r"mapping of parameters$"):
        parse_pipeline(GOOD, "x.yaml", ["read_jsonl.path.x=1"])


def test_a_stage_type_or_name_of_the_wrong_kind_is_a_config_error():
    with pytest.raises(ConfigError, match=r"^x.yaml:2: a stage's type is a name such as "
                                          r"read_jsonl, not list \['read_jsonl'\]$"):
        parse_pipeline("stages:\n  - {type: [read_jsonl], path: a}\n", "x.yaml")
    with pytest.raises(ConfigError, match=r"x.yaml:2: stage 'read_jsonl' \(read_jsonl\), "
                                          r"parameter 'name': Input should be a valid string"):
        parse_pipeline("stages:\n  - {type: read_jsonl, path: a, name: [x]}\n", "x.yaml")


def test_a_directory_or_unreadable_file_is_a_config_error(tmp_path):
    (tmp_path / "a.yaml").write_text(GOOD)
    with pytest.raises(ConfigError, match=rf"^{tmp_path}: a directory, not a pipeline file; "
                                          rf"name one YAML file such as {tmp_path}/a.yaml$"):
        load_pipeline(tmp_path)
