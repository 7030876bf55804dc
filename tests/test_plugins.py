"""Third-party stages: the base classes from ``curator``, and ``imports:`` in YAML."""

from __future__ import annotations

import textwrap

import pytest
from typer.testing import CliRunner

import curator
from curator.cli import app
from curator.config import ConfigError, parse_pipeline
from tests.conftest import assert_accounting, write_shards

runner = CliRunner()

PLUGIN = '''
import pyarrow as pa
import pyarrow.compute as pc
from curator import Filter


class NoDigits(Filter):
    """Removes documents that contain a digit."""

    type = "test_no_digits"

    def reasons(self, batch: pa.Table) -> pa.Array:
        digit = pc.match_substring_regex(batch.column("text"), "[0-9]")
        return pc.if_else(digit, "has_digit", pa.scalar(None, pa.string()))
'''


def _config(folder, imports: str, stage: str = "test_no_digits", extra: str = ""):
    inputs = folder / "in"
    write_shards(inputs, 2)
    path = folder / "p.yaml"
    path.write_text(f"name: plugins\noutput: {folder / 'run'}\nexecutor: {{type: local}}\n"
                    f"imports: {imports}\n{extra}stages:\n"
                    f"  - {{type: read_jsonl, path: '{inputs}/*.jsonl'}}\n"
                    f"  - {{type: {stage}}}\n  - {{type: write_parquet}}\n")
    return path


def test_the_stage_base_classes_are_public():
    from curator import BatchResult, BatchStage, DatasetStage, Filter, Sink, Source, Stage

    assert issubclass(Filter, BatchStage) and issubclass(Sink, BatchStage)
    assert {"BatchStage", "Filter", "Source", "Sink", "DatasetStage", "BatchResult"} <= set(
        curator.__all__)
    assert issubclass(DatasetStage, Stage) and issubclass(Source, Stage) and BatchResult


def test_a_stage_from_a_file_beside_the_yaml_runs_from_the_cli(tmp_path):
    (tmp_path / "my_stages.py").write_text(PLUGIN)
    config = _config(tmp_path, "[my_stages.py]")
    validated = runner.invoke(app, ["validate", str(config)])
    assert validated.exit_code == 0, validated.output
    result = runner.invoke(app, ["run", str(config)])
    assert result.exit_code == 0, result.output
    stage = assert_accounting(tmp_path / "run")["stages"][1]
    assert stage["type"] == "test_no_digits" and stage["removed_by_reason"]["has_digit"] > 0


def test_a_stage_from_a_module_name(tmp_path, monkeypatch):
    package = tmp_path / "pkg_for_plugins"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "digits.py").write_text(PLUGIN.replace("test_no_digits", "test_no_digits_mod"))
    monkeypatch.syspath_prepend(str(tmp_path))
    pipeline = parse_pipeline(textwrap.dedent("""
        imports: [pkg_for_plugins.digits]
        max_failed_fraction: 0.05
        stages: [{type: read_jsonl, path: x.jsonl}, {type: test_no_digits_mod}]
    """))
    assert type(pipeline.stages[1]).__module__ == "pkg_for_plugins.digits"
    assert pipeline.max_failed_fraction == 0.05
    assert parse_pipeline(pipeline.to_yaml()) == pipeline


@pytest.mark.parametrize(("body", "expected"), [
    (None, r"p.yaml:4: imports: broken.py: no such file \(.*broken.py\)$"),
    ("import no_such_module_here\n",
     r"p.yaml:4: imports: broken.py:1: ModuleNotFoundError: No module named "
     r"'no_such_module_here'$"),
    ("x = 1\ndef f(:\n", r"p.yaml:4: imports: broken.py:2: SyntaxError: invalid syntax$"),
])
def test_an_import_that_fails_is_one_line_naming_the_file(tmp_path, body, expected):
    if body is not None:
        (tmp_path / "broken.py").write_text(body)
    config = _config(tmp_path, "[broken.py]", stage="length_filter")
    with pytest.raises(ConfigError, match=expected):
        parse_pipeline(config.read_text(), str(config))
    result = runner.invoke(app, ["validate", str(config)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "broken.py" in lines[0]
