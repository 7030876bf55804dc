"""The runs a service lists and how each stands, read from real ``curate run`` processes: held
at a named point (running, its progress file moving), let go (done), killed (interrupted),
failing (failed, with its one-line reason); and the texts rewriting stages changed, kept in
``rewrites/`` by shard tasks (pii, clean) and by a dataset stage's removal (line_dedup)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from curator import halt as hook
from curator.rejected import in_sample
from curator.serve.runs import find_runs, run_detail, run_plan, run_summary
from tests.runtime.killing import finish, kill_group, start

pytestmark = pytest.mark.slow

EMAIL_DOCS = [  # ids 133, 189 and 228 are in rejected: ids' sample (in_sample)
    {"id": f"doc-{i:04d}",
     "text": (f"Write to person{i}@example.org about item {i}. " if i % 3 == 0 else "")
     + f"Paragraph {i} of a plain document about rivers, bridges and the towns along them.\n"
     + ("A line every document shares.\n" if i % 2 else "") + f"Closing words number {i}."}
    for i in range(120, 240)]


def _inputs(tmp_path: Path, shards: int = 6) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    for s in range(shards):
        with open(folder / f"shard-{s}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(d) + "\n" for d in EMAIL_DOCS[s::shards])
    return folder


def _config(tmp_path: Path, stages: str, name: str = "demo", rejected: str = "ids") -> Path:
    config = tmp_path / f"{name}.yaml"
    config.write_text(f"name: {name}\nexecutor: {{type: local, workers: 1}}\n"
                      f"rejected: {rejected}\nstages:\n"
                      f"  - {{type: read_jsonl, path: '{tmp_path / 'in'}/*.jsonl'}}\n{stages}",
                      encoding="utf-8")
    return config


PII_CHAIN = ("  - {type: pii}\n  - {type: clean}\n  - {type: line_dedup, unit: line}\n"
             "  - {type: write_parquet}\n")


def _wait(condition, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not in {seconds} s"
        time.sleep(0.05)


def test_a_held_run_is_running_with_live_progress_then_done(tmp_path):
    _inputs(tmp_path)
    runs = tmp_path / "runs"
    out, halt_dir = runs / "demo", tmp_path / "halt"
    proc = start(_config(tmp_path, PII_CHAIN), out, tmp_path / "log",
                 halt="shard-done:segment-00@2", halt_dir=halt_dir)
    try:
        _wait(lambda: (halt_dir / hook.HALTED).exists(), "halted")
        # the first shard's end reaches the file within a second, though the run now waits
        _wait(lambda: (run_summary(out)["progress"] or {}).get("done"), "progress written")
        summary = run_summary(out)
        assert summary["status"] == "running"
        progress = summary["progress"]
        assert progress["state"] == "running" and progress["segment"] == 0
        assert progress["total"] == 6 and 1 <= progress["done"] < 6
        assert 0 < progress["fraction"] < 1 and progress["pid"] != os.getpid()
        assert 0 < summary["docs_in"] <= 120  # read so far (no stats.json while it runs)
        assert find_runs([runs]) == {"demo": out.resolve()}
        (halt_dir / hook.HALTED).unlink()  # let it go on
        finish(proc, tmp_path / "log")
    finally:
        kill_group(proc)
    summary = run_summary(out)
    assert summary["status"] == "done" and summary["error"] is None
    assert summary["progress"]["fraction"] == 1.0 and summary["progress"]["state"] == "finished"
    assert summary["docs_in"] == 120 and summary["docs_kept"] == 120
    assert summary["progress"]["updated"] > progress["updated"]
    plan = {s["name"]: s["segment"] for s in run_plan(out)}
    assert plan == {"read_jsonl": 0, "pii": 0, "clean": 0, "line_dedup": 1, "write_parquet": 2}
    detail = run_detail(out)
    assert detail["stats"]["stages"][0]["in"] == 120 and detail["report"]
    assert any("run finished" in line for line in detail["log_tail"])


def test_rewriting_stages_keep_the_text_they_changed(tmp_path):
    """With ``rejected: documents`` every rewritten document's text before the stage; with
    ``ids`` (the default) the sample's (``curator.rejected.in_sample``) only."""
    _inputs(tmp_path)
    out = tmp_path / "runs" / "demo"
    proc = start(_config(tmp_path, PII_CHAIN, rejected="documents"), out, tmp_path / "log")
    finish(proc, tmp_path / "log")
    before = {d["id"]: d["text"] for d in EMAIL_DOCS}
    pii = pq.read_table(out / "rewrites" / "pii").to_pylist()
    assert {r["id"] for r in pii} == {d["id"] for d in EMAIL_DOCS if "@" in d["text"]}
    assert all(r["text"] == before[r["id"]] for r in pii)
    lines = pq.read_table(out / "rewrites" / "line_dedup").to_pylist()
    kept = {r["id"]: r["text"] for r in pq.read_table(out / "write_parquet").to_pylist()}
    shared = [d["id"] for d in EMAIL_DOCS if "shares" in d["text"]]
    # every copy of the shared line but the first goes: each such document was rewritten, and
    # its text before line_dedup still holds the line, its text after does not
    assert {r["id"] for r in lines} == set(shared[1:])
    assert all("A line every document shares." in r["text"] for r in lines)
    assert all("shares" not in kept[r["id"]] for r in lines)

    sampled = tmp_path / "runs" / "sampled"
    finish(start(_config(tmp_path, PII_CHAIN), sampled, tmp_path / "log2"), tmp_path / "log2")
    for stage, every in (("pii", pii), ("line_dedup", lines)):
        ids = pa.array([r["id"] for r in every])
        expected = sorted(pc.filter(ids, pa.array(in_sample(ids))).to_pylist())
        folder = sampled / "rewrites" / stage
        got = pq.read_table(folder).column("id").to_pylist() if folder.exists() else []
        assert sorted(got) == expected and expected


def test_a_killed_run_is_interrupted_and_a_failing_one_failed(tmp_path):
    _inputs(tmp_path)
    runs = tmp_path / "runs"
    halt_dir = tmp_path / "halt"
    proc = start(_config(tmp_path, PII_CHAIN), runs / "killed", tmp_path / "log",
                 halt="shard-done:segment-00@2", halt_dir=halt_dir)
    _wait(lambda: (halt_dir / hook.HALTED).exists(), "halted")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert run_summary(runs / "killed")["status"] == "interrupted"

    (tmp_path / "in" / "shard-0.jsonl").write_text('{"id": "x", "text": "ok"}\n{"id": \n',
                                                   encoding="utf-8")
    config = _config(tmp_path, "  - {type: write_parquet}\n", "broken")
    config.write_text(config.read_text() + "on_error: fail\n", encoding="utf-8")
    proc = start(config, runs / "broken", tmp_path / "log2")
    proc.wait(timeout=300)
    assert proc.returncode != 0
    summary = run_summary(runs / "broken")
    assert summary["status"] == "failed", summary
    assert "shard-0.jsonl" in summary["error"] and "\n" not in summary["error"]
    assert set(find_runs([runs])) == {"killed", "broken"}


def test_names_stay_unique_across_served_folders_and_links_out_are_left_out(tmp_path):
    for root in ("a", "b"):
        run = tmp_path / root / "same"
        run.mkdir(parents=True)
        (run / "run.json").write_text('{"config": {"name": "same", "stages": []}}')
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "run.json").write_text('{"config": {"name": "x", "stages": []}}')
    (tmp_path / "a" / "link").symlink_to(outside)
    found = find_runs([tmp_path / "a", tmp_path / "b"])
    assert found == {"a/same": (tmp_path / "a" / "same").resolve(),
                     "b/same": (tmp_path / "b" / "same").resolve()}
