"""docs/pipeline-keys.md names every top-level key a pipeline file accepts, and no other."""

from __future__ import annotations

import re

from curator.pipeline import PipelineModel
from tests.conftest import ROOT


def test_every_top_level_key_is_documented_once():
    text = (ROOT / "docs" / "pipeline-keys.md").read_text(encoding="utf-8")
    documented = re.findall(r"^### `(\w+)`$", text, flags=re.MULTILINE)
    assert sorted(documented) == sorted(PipelineModel.model_fields)
