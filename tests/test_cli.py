"""The ``curate`` command: run, resume, refuse a changed config, plan, validate, report."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from curator.cli import app
from tests.conftest import assert_accounting, write_shards

runner = CliRunner()


def _config(tmp_path, min_chars: int = 2000):
    inputs = tmp_path / "in"
    if not inputs.exists():
        write_shards(inputs, 3)
    path = tmp_path / "p.yaml"
    path.write_text(f"name: cli\noutput: {tmp_path / 'run'}\nexecutor: {{type: local}}\nstages:\n"
                    f"  - {{type: read_jsonl, path: '{inputs}/*.jsonl'}}\n"
                    f"  - {{type: length_filter, min_chars: {min_chars}}}\n"
                    "  - {type: write_parquet}\n")
    return path


def test_run_resume_changed_config_and_force(tmp_path):
    config = _config(tmp_path)
    first = runner.invoke(app, ["run", str(config)])
    assert first.exit_code == 0, first.output
    assert "3 shards run, 0 resumed" in first.output
    stats = assert_accounting(tmp_path / "run")
    assert stats["stages"][1]["removed_by_reason"]["too_short"] > 0

    again = runner.invoke(app, ["run", str(config)])
    assert "0 shards run, 3 resumed" in again.output

    changed = runner.invoke(app, ["run", str(config), "--set", "length_filter.min_chars=5000"])
    assert changed.exit_code == 0, changed.output
    message = " ".join(changed.output.split())
    assert "3 shards run, 0 resumed" in message  # each decided again from its kept lengths
    assert "scores kept: length_filter 3" in message
    after = json.loads((tmp_path / "run" / "stats.json").read_text())
    assert after["stages"][1]["removed"] > stats["stages"][1]["removed"]

    forced = runner.invoke(app, ["run", str(config), "--set", "length_filter.min_chars=5000",
                                 "--force"])
    assert forced.exit_code == 0 and "3 shards run" in forced.output
    assert "scores kept" not in forced.output  # --force computes everything again
    again_forced = json.loads((tmp_path / "run" / "stats.json").read_text())
    assert again_forced["stages"][1]["removed"] == after["stages"][1]["removed"]


def test_run_log_keeps_what_each_run_told_the_terminal(tmp_path):
    config = _config(tmp_path)
    assert runner.invoke(app, ["run", str(config)]).exit_code == 0
    again = runner.invoke(app, ["run", str(config), "--set", "length_filter.min_chars=5000"])
    assert again.exit_code == 0, again.output
    log = (tmp_path / "run" / "run.log").read_text(encoding="utf-8")
    assert log.count("run of 'cli' started") == 2 and log.count("run finished") == 2
    assert log.count("3 shards run, 0 resumed") == 2  # the summary the terminal printed
    assert "scores kept: length_filter 3" in log and "length_filter" in log
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.jsonl").write_text("not json\n" * 20, encoding="utf-8")  # past the failure budget
    broken = tmp_path / "broken.yaml"
    broken.write_text(config.read_text().replace(str(tmp_path / "in"), str(bad)))
    failed = runner.invoke(app, ["run", str(broken), "--force"])
    assert failed.exit_code != 0
    assert "run stopped:" in (tmp_path / "run" / "run.log").read_text(encoding="utf-8")


def test_validate_plan_and_report(tmp_path):
    config = _config(tmp_path)
    assert "valid pipeline 'cli' with 3 stages" in runner.invoke(app, ["validate",
                                                                       str(config)]).output
    plan = runner.invoke(app, ["plan", str(config)]).output
    assert "read_jsonl(read_jsonl) → length_filter(length_filter) → write_parquet" in plan
    runner.invoke(app, ["run", str(config)])
    (tmp_path / "run" / "report.html").unlink()
    report = runner.invoke(app, ["report", str(tmp_path / "run")])
    assert report.exit_code == 0
    assert "length_filter" in report.output
    assert f"report: {tmp_path / 'run' / 'report.html'}" in report.output.splitlines()
    page = (tmp_path / "run" / "report.html").read_text()
    assert "<svg" in page and "too_short" in page


def test_validate_reports_a_misspelling_with_exit_code_2(tmp_path):
    config = _config(tmp_path)
    config.write_text(config.read_text().replace("min_chars", "min_chras"))
    result = runner.invoke(app, ["validate", str(config)])
    assert result.exit_code == 2
    assert "did you mean 'min_chars'?" in " ".join(result.output.split())
