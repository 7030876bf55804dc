"""Honest mistakes are caught before the work, and nothing is skipped without a word (issue 29,
defects 1-3; the YAML bomb of issue 27): each through a real `curate validate` / `curate run`
process, one line on stderr, exit 2 for a configuration mistake (1 for a run that failed), and
no run directory where the run was refused before starting."""

from __future__ import annotations

import gzip
import json
import resource
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLE

#: ``curate`` as installed: the launcher (its early YAML read) and then the CLI.
_CURATE = "import sys; from curator.launch import main; sys.argv[0] = 'curate'; main()"


def curate(*args: str, timeout: float = 120, memory: int | None = None
           ) -> subprocess.CompletedProcess:
    def limit() -> None:  # in the child: every process of the run inherits it
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run([sys.executable, "-c", _CURATE, *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout,
                          preexec_fn=limit if memory else None)


def one_line(result: subprocess.CompletedProcess, code: int, *words: str) -> str:
    lines = result.stderr.splitlines()
    assert result.returncode == code, result.stderr[-3000:]
    assert len(lines) == 1, result.stderr[-3000:]
    assert lines[0].startswith("error: "), lines[0]
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]


def refused_before_the_run(tmp_path: Path, config: Path, *words: str) -> str:
    """`curate validate` and `curate run` both refuse ``config`` with the same line, exit 2,
    and the run leaves no run directory."""
    checked = one_line(curate("validate", str(config)), 2, *words)
    ran = one_line(curate("run", str(config)), 2, *words)
    assert ran == checked
    assert not (tmp_path / "run").exists()
    return checked


def pipeline(tmp_path: Path, *stages: str, source: str | None = None) -> Path:
    """A pipeline reading the bundled Japanese sample, with ``stages`` before the writer."""
    path = tmp_path / "p.yaml"
    source = source or f"{{type: read_jsonl, path: '{SAMPLE / 'aozora_sample.jsonl.gz'}'}}"
    path.write_text(f"name: honest\noutput: {tmp_path / 'run'}\nexecutor: {{type: local}}\n"
                    f"stages:\n  - {source}\n" + "".join(f"  - {s}\n" for s in stages)
                    + "  - {type: write_parquet}\n")
    return path


def _fasttext_model(tmp_path: Path, name: str, labels: list[str]) -> Path:
    """A minimal supervised fastText model file, written field by field as fastText saves one
    (version 12; one word, softmax), whose labels are ``labels``: what the checks read, and a
    model fastText loads. Written, not trained: training a toy model can fail by chance."""
    pytest.importorskip("fasttext")
    dim, words = 2, ["word"]
    entries = [(w, 0) for w in words] + [(f"__label__{label}", 1) for label in labels]
    # dim ws epoch minCount neg wordNgrams loss(softmax) model(supervised) bucket minn maxn
    # lrUpdateRate t; then the dictionary: size nwords nlabels ntokens pruneidx_size(-1: none)
    args = struct.pack("<12id", dim, 5, 1, 1, 5, 1, 3, 3, 1, 0, 0, 100, 1e-4)
    head = struct.pack("<iiiqq", len(entries), len(words), len(labels), 10, -1)
    dictionary = b"".join(w.encode() + b"\0" + struct.pack("<qb", 1, kind) for w, kind in entries)

    def matrix(rows: int) -> bytes:  # not quantised, then rows x dim float32
        return b"\0" + struct.pack(f"<qq{rows * dim}f", rows, dim, *[0.1] * (rows * dim))

    path = tmp_path / f"{name}.bin"
    path.write_bytes(struct.pack("<ii", 793712314, 12) + args + head + dictionary
                     + matrix(len(words) + 1) + matrix(len(labels)))
    return path


# ---------------------------------------------------------------- defect 1: silent 100 % loss
@pytest.fixture(scope="module")
def lid_model() -> None:
    from tests.conftest import require_lid_model

    require_lid_model()


def test_langid_codes_the_model_lacks_are_refused_with_the_right_code(tmp_path, lid_model):
    """`languages: [jp, english]` removed every document and exited 0."""
    config = pipeline(tmp_path, "{type: langid, languages: [jp, english]}")
    line = refused_before_the_run(tmp_path, config, "stage 'langid' (langid)", "lid.176.ftz",
                                  "'jp' (did you mean 'ja'?)", "'english' (did you mean 'en'?)")
    assert "would match no document" in line


def test_one_langid_code_and_min_score_keys_are_checked(tmp_path, lid_model):
    config = pipeline(tmp_path, "{type: langid, languages: [jp]}")
    one_line(curate("validate", str(config)), 2, "languages: 'jp' is not a language of "
             "lid.176.ftz", "did you mean 'ja'?")
    config = pipeline(tmp_path, "{type: langid, languages: [ja], min_score: {jp: 0.5}}")
    one_line(curate("validate", str(config)), 2, "min_score: 'jp'", "did you mean 'ja'?")
    config = pipeline(tmp_path, "{type: langid, languages: []}")
    one_line(curate("validate", str(config)), 2, "languages: an empty list keeps no document")
    config = pipeline(tmp_path, "{type: langid, languages: [ja, en, jpn, eng_Latn]}")
    assert curate("validate", str(config)).returncode == 0  # ISO 639-3 and FLORES codes too


def test_langid_codes_follow_the_configured_models_labels(tmp_path, lid_model):
    """A GlotLID-style model (``__label__jpn_Jpan``): its own labels are accepted, and a guess
    names the label the model has."""
    model = _fasttext_model(tmp_path, "glot", ["jpn_Jpan", "eng_Latn", "deu_Latn"])
    good = pipeline(tmp_path, f"{{type: langid, model: '{model}', languages: [jpn_Jpan, en]}}")
    assert curate("validate", str(good)).returncode == 0, curate("validate", str(good)).stderr
    config = pipeline(tmp_path, f"{{type: langid, model: '{model}', languages: [jp]}}")
    one_line(curate("validate", str(config)), 2, "'jp' is not a language of glot.bin",
             "did you mean 'ja' (the model's jpn_Jpan)?")
    config = pipeline(tmp_path, f"{{type: langid, model: '{model}', languages: [fr]}}")
    one_line(curate("validate", str(config)), 2, "'fr' is not a language of glot.bin",
             "its 3 languages: de, en, ja")


def test_labels_read_from_the_model_file_are_fasttexts(tmp_path, lid_model):
    import fasttext

    from curator.stages.langid import bundled_model, model_labels

    for path in (bundled_model(), _fasttext_model(tmp_path, "three", ["a", "b", "c"])):
        assert list(model_labels(path)) == fasttext.load_model(str(path)).get_labels()
    truncated = tmp_path / "cut.bin"
    truncated.write_bytes(bundled_model().read_bytes()[:200])
    with pytest.raises(ValueError, match="truncated fastText model"):
        model_labels(truncated)


def _records(path: Path, records: list[dict]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    return path


def test_a_reader_failing_every_record_stops_the_run(tmp_path):
    """`read_jsonl text_field: body`, a field no record has, failed every document and exited
    0: a reader is a stage inside the failure budget (max_failed_fraction) like any other."""
    source = f"{{type: read_jsonl, path: '{SAMPLE / 'aozora_sample.jsonl.gz'}', text_field: body}}"
    result = curate("run", str(pipeline(tmp_path, source=source)))
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and result.stderr.splitlines()[-1] == errors[0], result.stderr
    assert all(w in errors[0] for w in ("stage 'read_jsonl' failed on", "of shard",
                                        "max_failed_fraction 0.1", "field 'body'")), errors[0]
    assert not list((tmp_path / "run").glob("write_parquet/*.parquet"))


def test_a_reader_failing_a_few_records_stays_within_the_budget(tmp_path):
    with gzip.open(SAMPLE / "aozora_sample.jsonl.gz", "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    docs[3].pop("text")
    docs[7]["text"] = None
    path = _records(tmp_path / "few.jsonl.gz", docs)
    result = curate("run", str(pipeline(tmp_path, source=f"{{type: read_jsonl, path: '{path}'}}")))
    assert result.returncode == 0, result.stderr[-3000:]
    stats = json.loads((tmp_path / "run" / "stats.json").read_text())
    assert stats["stages"][0]["failed"] == 2
    assert stats["stages"][0]["kept"] == len(docs) - 2


# ---------------------------------------------------------------- defect 2: validate == run
def test_an_input_glob_matching_no_file_is_refused_before_the_run(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "part-0.jsonl.gz").write_bytes(b"")
    source = f"{{type: read_jsonl, path: '{tmp_path}/data/*.jsonl'}}"  # the files are .jsonl.gz
    refused_before_the_run(tmp_path, pipeline(tmp_path, source=source),
                           "stage 'read_jsonl' (read_jsonl): no input files match",
                           f"{tmp_path}/data/*.jsonl")


def test_inputs_of_a_folder_not_made_yet_are_named_by_validate_and_refused_by_run(tmp_path):
    """Another pipeline's output (pipelines/mix.yaml reads runs/*/write_parquet/) validates
    before that pipeline has run, and says so; the run refuses to start without it."""
    pattern = f"{tmp_path}/runs/cc/write_parquet/*.parquet"
    config = pipeline(tmp_path, source=f"{{type: read_parquet, path: '{pattern}'}}")
    checked = curate("validate", str(config))
    assert checked.returncode == 0, checked.stderr
    assert f"inputs not there yet (made by another run?): {pattern}" in checked.stderr
    one_line(curate("run", str(config)), 2, "no input files match", pattern)
    assert not (tmp_path / "run").exists()


def test_a_missing_decontamination_task_file_is_refused_before_the_run(tmp_path):
    typo = ROOT / "data" / "decontaminate" / "gsm8k" / "tset.jsonl.gz"
    stage = f"{{type: decontaminate, tasks: [{{name: gsm8k, path: '{typo}'}}]}}"
    refused_before_the_run(tmp_path, pipeline(tmp_path, stage),
                           "stage 'decontaminate' (decontaminate): task 'gsm8k': input not "
                           f"found: {typo}")


def test_a_classifier_label_the_fasttext_model_lacks_is_refused_before_the_run(tmp_path):
    model = _fasttext_model(tmp_path, "quality", ["hq", "lq"])
    stage = f"{{type: classifier_filter, model: '{model}', label: high, threshold: 0.5}}"
    refused_before_the_run(tmp_path, pipeline(tmp_path, stage),
                           "stage 'classifier_filter' (classifier_filter)",
                           "label '__label__high' is not one of the model's "
                           "['__label__hq', '__label__lq']; did you mean 'hq'?")
    no_label = f"{{type: classifier_filter, model: '{model}', threshold: 0.5}}"  # no sidecar
    one_line(curate("validate", str(pipeline(tmp_path, no_label))), 2,
             "no sidecar names the positive label; set label: (one of __label__hq, __label__lq)")
    good = f"{{type: classifier_filter, model: '{model}', label: hq, threshold: 0.5}}"
    assert curate("validate", str(pipeline(tmp_path, good))).returncode == 0


def test_a_classifier_label_the_hf_model_lacks_is_refused_before_the_run(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    model = tmp_path / "hf"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"id2label": {"0": "NEG", "1": "POS"}}))
    (model / "model.safetensors").write_bytes(b"")  # the check reads config.json only
    (model / "tokenizer.json").write_text("{}")
    stage = f"{{type: classifier_filter, model: '{model}', label: positive, device: cpu}}"
    refused_before_the_run(tmp_path, pipeline(tmp_path, stage),
                           "label 'positive' is not one of ['NEG', 'POS']")
    index = f"{{type: classifier_filter, model: '{model}', label: 2, device: cpu}}"
    one_line(curate("validate", str(pipeline(tmp_path, index))), 2, "label index 2 outside 0..1")


_CHECKED_PLUGIN = """
import pyarrow as pa
from curator import Filter


class NeedsItsFile(Filter):
    \"\"\"A third-party stage that says before the run that its file is missing.\"\"\"

    type = "test_needs_its_file"
    table: str

    def check(self) -> None:
        super().check()
        import os
        if not os.path.exists(self.table):
            raise ValueError(f"table: {self.table!r} does not exist")

    def reasons(self, batch: pa.Table) -> pa.Array:
        return pa.nulls(batch.num_rows, pa.string())
"""


def test_a_third_party_stage_checks_itself_through_the_hook(tmp_path):
    """``Stage.check``: what a stage knows is wrong before the run, validate and run say."""
    (tmp_path / "checked.py").write_text(_CHECKED_PLUGIN)
    config = pipeline(tmp_path, f"{{type: test_needs_its_file, table: '{tmp_path}/nope.tsv'}}")
    config.write_text("imports: [checked.py]\n" + config.read_text())
    refused_before_the_run(tmp_path, config, "stage 'test_needs_its_file' (test_needs_its_file):"
                           f" table: '{tmp_path}/nope.tsv' does not exist")
    (tmp_path / "nope.tsv").write_text("")
    assert curate("validate", str(config)).returncode == 0


# ---------------------------------------------------------------- defect 3: configuration
def _yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path


def test_a_stage_type_that_is_a_list_is_one_line(tmp_path):
    """`type: [read_jsonl]` was a TypeError traceback from the launcher."""
    config = _yaml(tmp_path, "stages:\n  - {type: [read_jsonl], path: x}\n")
    for command in ("validate", "run"):
        one_line(curate(command, str(config)), 2, f"{config}:2: a stage's type is a name such "
                 "as read_jsonl, not list ['read_jsonl']")


def test_yaml_nested_50k_deep_is_one_line(tmp_path):
    """50,000 nested lists were a RecursionError traceback."""
    config = _yaml(tmp_path, "stages: " + "[" * 50_000 + "]" * 50_000 + "\n")
    for command in ("validate", "run"):
        one_line(curate(command, str(config)), 2, f"{config}:1: collections nested more "
                 "than 64 deep")


def test_a_python_tag_through_set_is_refused_and_never_run(tmp_path):
    marker = tmp_path / "ran"
    config = pipeline(tmp_path, "{type: length_filter, min_chars: 10}")
    value = f'length_filter.min_chars=!!python/object/apply:os.system ["touch {marker}"]'
    for command in ("validate", "run"):
        one_line(curate(command, str(config), "--set", value), 2, "--set",
                 "could not determine a constructor for the tag",
                 "plain YAML only: no !!python or other custom tags")
    assert not marker.exists()


def test_a_folder_given_as_the_config_is_one_line(tmp_path):
    """`curate run pipelines/` printed a 48-line traceback."""
    for command in ("validate", "run", "plan"):
        one_line(curate(command, "pipelines/"), 2, "pipelines: a directory, not a pipeline "
                 "file; name one YAML file such as pipelines/")


def test_a_duplicate_key_is_refused_naming_file_line_and_key(tmp_path):
    """`min_chars` given twice: the last (999999) won silently."""
    config = _yaml(tmp_path, "stages:\n  - type: read_jsonl\n    path: x\n"
                             "  - type: length_filter\n    min_chars: 10\n"
                             "    min_chars: 999999\n")
    for command in ("validate", "run"):
        one_line(curate(command, str(config)), 2, f"{config}:6: duplicate key 'min_chars' "
                 "(first on line 5)")


def test_set_values_are_not_read_as_base_60(tmp_path):
    """`--set common_crawl.files=5:8` was read as YAML 1.1's base 60 (308) and refused."""
    config = pipeline(tmp_path, source="{type: common_crawl, snapshots: [CC-MAIN-2024-51]}")
    result = curate("validate", str(config), "--set", "common_crawl.files=5:8")
    assert result.returncode == 0, result.stderr
    from curator.config import load_pipeline

    assert load_pipeline(config, ["common_crawl.files=5:8"]).stages[0].files == "5:8"


# ---------------------------------------------------------------- issue 27-2: a YAML bomb
def _bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("where", ["unknown keys", "a stage parameter"])
def test_a_billion_laughs_yaml_is_one_line_within_a_memory_bound(tmp_path, where):
    """680 bytes of nested anchors grew past 6 GB before any error, even under an unknown key.
    Under 3 GB of address space (what a Python with pyarrow needs), it is one line."""
    if where == "unknown keys":
        text = _bomb() + "stages: [{type: read_jsonl, path: x}]\n"
    else:
        text = ("stages:\n  - {type: read_jsonl, path: x}\n  - type: length_filter\n"
                "    min_chars:\n" + "".join(f"      {line}\n" for line in _bomb().splitlines()))
    config = _yaml(tmp_path, text)
    for command in ("validate", "run"):
        one_line(curate(command, str(config), memory=3 << 30), 2, f"{config}:",
                 "aliases (*name) expand the document by", "at most 100,000 are read")
