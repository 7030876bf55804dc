"""The container definitions install curator with the Makefile's own step, so the two cannot
drift: ``make install VENV=/opt/venv EXTRAS=...`` and no pip of their own."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.conftest import ROOT
from tests.jobs.test_submit import tool

CONTAINERS = [ROOT / "docker" / n for n in ("Dockerfile", "Dockerfile.cpu", "curator.def")]


@pytest.mark.parametrize("path", CONTAINERS, ids=lambda p: p.name)
def test_containers_install_with_make_install(path):
    text = path.read_text()
    assert re.search(r"^\s*(RUN )?make install VENV=/opt/venv EXTRAS=", text, re.M), path
    assert "pip install" not in text and "pip3 install" not in text
    assert "/opt/venv/bin" in text


def test_make_install_takes_the_extras(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("make not installed")
    dry = subprocess.run(["make", "-n", "install", f"VENV={tmp_path}/v", "EXTRAS=gpu,ray"],
                         cwd=ROOT, capture_output=True, text=True)
    assert "pip install -q -e '.[gpu,ray]'" in dry.stdout, dry.stdout + dry.stderr


@pytest.mark.skipif(tool("hadolint") is None, reason="hadolint not installed")
def test_dockerfiles_pass_hadolint():
    for path in CONTAINERS[:2]:
        assert subprocess.run([tool("hadolint"), str(path)]).returncode == 0
