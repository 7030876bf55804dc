"""`curate` fails in one line with the contract's exit code (2 bad usage, 1 failed), never with
a traceback: bad --workers, an unwritable --output, an unreachable --scheduler, a missing
optional library, and a script that runs a pipeline without the ``__main__`` guard."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pytest

from curator import Pipeline, ReadJsonl, WriteParquet
from curator.batch import BatchResult
from curator.stages.base import BatchStage
from tests.conftest import ROOT, write_shards


def curate(*args: str, env: dict[str, str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "curator.cli", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout, env=env)


def _config(tmp_path: Path, stages: str = "") -> Path:
    inputs = tmp_path / "in"
    write_shards(inputs, 2)
    path = tmp_path / "p.yaml"
    path.write_text(f"name: f\noutput: {tmp_path / 'run'}\nexecutor: {{type: dask, workers: 1}}\n"
                    f"stages:\n  - {{type: read_jsonl, path: '{inputs}/*.jsonl'}}\n{stages}"
                    "  - {type: write_parquet}\n")
    return path


def _one_line(result: subprocess.CompletedProcess, code: int, *words: str) -> str:
    lines = result.stderr.splitlines()
    assert result.returncode == code, result.stderr[-3000:]
    assert len(lines) == 1, result.stderr[-3000:]
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]


@pytest.mark.parametrize("workers", ["-1", "0"])
def test_workers_below_one_is_bad_usage(tmp_path, workers):
    result = curate("run", str(_config(tmp_path)), "--workers", workers, timeout=60)
    _one_line(result, 2, "--workers must be at least 1", workers)
    assert not (tmp_path / "run").exists()


def test_unknown_executor_is_bad_usage(tmp_path):
    _one_line(curate("run", str(_config(tmp_path)), "--executor", "spark"), 2, "spark")


def test_unwritable_output_is_one_line(tmp_path):
    config = _config(tmp_path)
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    _one_line(curate("run", str(config), "--output", str(a_file / "run")), 1,
              str(a_file / "run"), "Not a directory")
    _one_line(curate("run", str(config), "--output", "/sys/curator-test-run"), 1,
              "/sys/curator-test-run")


def test_unreachable_scheduler_is_one_line_within_seconds(tmp_path):
    config = str(_config(tmp_path))
    started = time.monotonic()
    result = curate("run", config, "--scheduler", "tcp://127.0.0.1:1", timeout=60)
    _one_line(result, 1, "cannot reach the Dask scheduler at tcp://127.0.0.1:1")
    absent = str(tmp_path / "absent-scheduler.json")
    result = curate("run", config, "--scheduler-file", absent, timeout=60)
    _one_line(result, 1, f"no Dask scheduler file at {absent}")
    assert time.monotonic() - started < 40


# ---------------------------------------------------------------------------- optional libraries
def _hide(tmp_path: Path, module: str) -> dict[str, str]:
    """An environment in which ``import module`` fails, as where it is not installed."""
    hider = tmp_path / "hide"
    hider.mkdir()
    (hider / "sitecustomize.py").write_text(f"import sys\nsys.modules[{module!r}] = None\n")
    return {**os.environ, "PYTHONPATH": str(hider)}


def test_missing_library_is_named_with_its_extra_before_anything_runs(tmp_path):
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text("{}")  # validation checks the path and kind; nothing is loaded
    config = _config(tmp_path, f"  - {{type: tokenize, tokenizer: '{tokenizer}'}}\n")
    env = _hide(tmp_path, "tokenizers")
    for command in ("validate", "run"):
        _one_line(curate(command, str(config), env=env), 2,
                  "stage 'tokenize' (tokenize) needs tokenizers",
                  "pip install 'curator[tokenize]'")
    assert not (tmp_path / "run").exists()
    assert curate("validate", str(config)).returncode == 0  # where it is installed


class NeedsAbsentModule(BatchStage):
    """A third-party stage that declares a library nobody installed."""

    type = "test_needs_absent_module"
    requires: ClassVar[dict[str, str]] = {"curator_test_absent_module": "absent"}

    def process(self, batch: pa.Table) -> BatchResult:
        return BatchResult(kept=batch)


def test_a_stage_declares_what_it_requires(tmp_path):
    inputs = tmp_path / "in"
    write_shards(inputs, 1)
    pipeline = Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), NeedsAbsentModule(),
                         WriteParquet()])
    with pytest.raises(ImportError, match=r"needs curator_test_absent_module: "
                                          r"pip install 'curator\[absent\]'"):
        pipeline.run(output=tmp_path / "run", executor="local", progress=False)
    assert not (tmp_path / "run").exists()


class RefusesItsSetting(BatchStage):
    """A third-party stage whose ``check`` refuses its configuration before the run."""

    type = "test_refuses_its_setting"
    wanted: str = "ok"

    def check(self) -> None:
        super().check()
        if self.wanted != "ok":
            raise ValueError(f"wanted: {self.wanted!r} is not 'ok'")

    def process(self, batch: pa.Table) -> BatchResult:
        return BatchResult(kept=batch)


def test_a_stage_check_refuses_before_anything_runs(tmp_path):
    inputs = tmp_path / "in"
    write_shards(inputs, 1)
    stages = [ReadJsonl(path=f"{inputs}/*.jsonl"), RefusesItsSetting(wanted="no"),
              WriteParquet()]
    refused = r"^stage 'test_refuses_its_setting' \(test_refuses_its_setting\): wanted: 'no'"
    with pytest.raises(ValueError, match=refused + r" is not 'ok'$"):
        Pipeline(stages).run(output=tmp_path / "run", executor="local", progress=False)
    assert not (tmp_path / "run").exists()
    stages[0] = ReadJsonl(path=f"{inputs}/*.jsonl.gz")  # the shards are .jsonl
    with pytest.raises(ValueError, match=r"stage 'read_jsonl' \(read_jsonl\): no input files "
                                         r"match .*; stage 'test_refuses_its_setting'"):
        Pipeline(stages).run(output=tmp_path / "run", executor="local", progress=False)
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------------------- scripts
def _readme_example() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split("```python\n", 1)[1].split("```", 1)[0]


def _run_script(tmp_path: Path, code: str) -> subprocess.CompletedProcess:
    script = tmp_path / "mine.py"
    script.write_text(code.replace('"runs/mine"', repr(str(tmp_path / "run"))))
    return subprocess.run([sys.executable, str(script)], cwd=ROOT, text=True,
                          capture_output=True, timeout=180,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_readme_example_runs_as_a_script(tmp_path):
    result = _run_script(tmp_path, _readme_example())
    assert result.returncode == 0, result.stderr[-3000:]
    assert list((tmp_path / "run" / "write_parquet").glob("part-*.parquet"))


def test_script_without_main_guard_says_so_briefly(tmp_path):
    guarded = _readme_example()
    head, guard = guarded.split('if __name__ == "__main__":', 1)
    unguarded = head + "\n".join(line.strip() for line in guard.splitlines()[1:]) + "\n"
    result = _run_script(tmp_path, unguarded)
    assert result.returncode != 0
    stderr = result.stderr
    assert 'if __name__ == "__main__":' in stderr.splitlines()[-1], stderr[-3000:]
    assert stderr.count("Traceback") == 1 and "Nanny" not in stderr, stderr[-3000:]
    assert len(stderr.splitlines()) < 25, stderr[-3000:]
