"""``curate report`` on a run that was stopped (SIGKILL at a named point): the figures its
committed shards and finished dataset stages hold, marked partial; once the run ends, the whole."""

from __future__ import annotations

from typer.testing import CliRunner

from curator.cli import app
from tests.conftest import write_shards
from tests.runtime import killing


def test_report_of_a_stopped_run_shows_its_figures_so_far(tmp_path):
    inputs = tmp_path / "in"
    write_shards(inputs, 4)
    config = tmp_path / "p.yaml"
    config.write_text("name: stopped\nexecutor: {type: local}\nstages:\n"
                      f"  - {{type: read_jsonl, path: '{inputs}/*.jsonl'}}\n"
                      "  - {type: exact_dedup}\n  - {type: write_parquet}\n", encoding="utf-8")
    run_dir = tmp_path / "run"
    killing.kill_at(config, run_dir, "shard-done:segment-00@2", tmp_path / "run.log")

    stopped = CliRunner().invoke(app, ["report", str(run_dir)])
    assert stopped.exit_code == 0, stopped.output
    text = " ".join(stopped.output.split())
    assert "partial: the run is running or was stopped" in text
    assert "segment-00 2" in text and "dataset stages finished: none" in text
    assert "partial: the run" in (run_dir / "report.html").read_text(encoding="utf-8")
    read = next(line for line in stopped.output.splitlines() if "read_jsonl" in line)
    assert read.split("│")[3].strip() != "0"  # the two committed shards' documents

    killing.run(config, run_dir, tmp_path / "run.log")
    whole = CliRunner().invoke(app, ["report", str(run_dir)])
    assert whole.exit_code == 0 and "partial:" not in whole.output
    assert "partial:" not in (run_dir / "report.html").read_text(encoding="utf-8")


def test_report_and_show_of_a_run_with_a_damaged_record_say_one_line(tmp_path):
    inputs = tmp_path / "in"
    write_shards(inputs, 2)
    config = tmp_path / "p.yaml"
    config.write_text("name: damaged\nexecutor: {type: local}\nstages:\n"
                      f"  - {{type: read_jsonl, path: '{inputs}/*.jsonl'}}\n"
                      "  - {type: write_parquet}\n", encoding="utf-8")
    run_dir = tmp_path / "run"
    killing.run(config, run_dir, tmp_path / "run.log")
    (run_dir / "stats.json").unlink()  # as a stopped run leaves it
    (run_dir / "run.json").write_text("{torn", encoding="utf-8")

    for args in (["report", str(run_dir)], ["show", str(run_dir), "--kept"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 1, result.output
        assert isinstance(result.exception, SystemExit)  # not the DamagedRecord raised
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert len(lines) == 1 and "run.json: damaged record" in lines[0], result.output
