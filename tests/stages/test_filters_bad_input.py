"""Issue 10's bad input through the product path: empty text, a 10 MB single-line text, text of
only emoji or only control characters go through every cleaning and filtering stage in one
pipeline; each is kept, removed with a reason or failed with a reason, never a crash, and the
accounting holds."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from curator import Pipeline, ReadJsonl, WriteParquet
from curator.stages.base import stage_class
from tests.conftest import assert_accounting

NASTY = {
    "empty": "",
    "huge_line": "word " * 2_000_000,  # 10 MB, no newline
    "emoji": "😀🎉👩‍👩‍👧🇯🇵" * 50,
    "control": "\x00\x01\x02\x1b\x7f\u200b\ufeff" * 50,
    "ok": ("The harbour town woke slowly that morning, with fog rolling in from the grey sea. "
           "Fishermen checked their nets and argued quietly about the price of diesel. "
           "A baker on the corner had already sold most of the bread she made before dawn. "
           "Children walked to school along the sea wall, counting the gulls on the railings. "
           "By noon the fog had lifted and the ferry to the island left on time. "
           "Visitors who came for the festival found the streets crowded and the cafes full. "
           "In the evening the lighthouse keeper wrote in his log that the wind was rising. "
           "Nobody in the town expected the storm that would arrive before the next sunrise."),
}


def test_nasty_texts_pass_every_filter_stage_without_a_crash(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": k, "text": v, "url": f"https://{k}.example.com/"})
                           + "\n" for k, v in NASTY.items()))
    stages = [ReadJsonl(path=str(src)),
              stage_class("clean")(),
              stage_class("pii")(),
              stage_class("langid")(),
              stage_class("url_filter")(substrings=["/blocked/"]),
              stage_class("heuristic_filter")(
                  presets=["gopher_quality", "gopher_repetition", "c4", "fineweb", "nemo_en",
                           "swallow", "hojichar", "fineweb2_ja"]),
              WriteParquet()]
    Pipeline(stages, output=str(tmp_path / "run")).run(executor="local", progress=False)
    stats = assert_accounting(tmp_path / "run")
    first = stats["stages"][1]
    assert first["in"] == len(NASTY)
    kept = set(pq.read_table(tmp_path / "run" / "write_parquet").column("id").to_pylist())
    assert "ok" in kept
    gone = {k for k in NASTY if k not in kept}
    assert gone >= {"empty", "emoji", "control"}, kept
