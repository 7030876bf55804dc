"""NeMo Curator 1.4 side of ``bench_nemo.py``; runs in the NeMo virtualenv (``make .venv-nemo``).

    .venv-nemo/bin/python benchmarks/nemo_peer.py decisions IN.jsonl OUT.jsonl
    .venv-nemo/bin/python benchmarks/nemo_peer.py english|langid IN_DIR OUT_DIR [--model FTZ]

``decisions`` applies the English pipeline's 28 filters (built from the package's own YAML) to
each document in one process and writes the first filter that removes it. ``english`` and
``langid`` run NeMo's pipeline (JsonlReader -> ScoreFilter(s) -> JsonlWriter) on Ray Data, the
executor that runs on a small CPU machine, and print ``RESULT {"seconds": ...}``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import hydra
import nemo_curator
from omegaconf import OmegaConf

CONFIG = Path(nemo_curator.__file__).parent / "config" / "text"


def english_filters() -> list:
    cfg = OmegaConf.load(CONFIG / "heuristic_filter_english_pipeline.yaml")
    return [hydra.utils.instantiate(OmegaConf.to_container(s["filter_obj"], resolve=False))
            for s in cfg.stages if "filter_obj" in s]


def decisions(src: str, dst: str) -> None:
    filters = english_filters()
    with open(src, encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as out:
        for line in f:
            doc = json.loads(line)
            reason = None
            for flt in filters:
                try:
                    keep = flt.keep_document(flt.score_document(doc["text"]))
                except ZeroDivisionError:
                    keep, reason = False, f"{flt.name}:ZeroDivisionError"
                if not keep:
                    reason = reason or flt.name
                    break
            out.write(json.dumps({"id": doc["id"], "reason": reason}) + "\n")


def pipeline(mode: str, src: str, dst: str, model: str | None) -> None:
    from nemo_curator.backends.ray_data import RayDataExecutor
    from nemo_curator.pipeline import Pipeline
    from nemo_curator.stages.text.filters.fasttext.fasttext_filters import FastTextLangId
    from nemo_curator.stages.text.filters.score_filter import ScoreFilter
    from nemo_curator.stages.text.io.reader import JsonlReader
    from nemo_curator.stages.text.io.writer import JsonlWriter

    stages: list = [JsonlReader(file_paths=src, files_per_partition=1)]
    if mode == "english":
        stages += [ScoreFilter(filter_obj=f, text_field="text") for f in english_filters()]
    else:
        stages.append(ScoreFilter(filter_obj=FastTextLangId(model_path=model, min_langid_score=0.0),
                                  text_field="text", score_field="language"))
    stages.append(JsonlWriter(path=dst))
    pipe = Pipeline(name=f"bench_{mode}", stages=stages)
    start = time.perf_counter()
    pipe.run(executor=RayDataExecutor())
    print("RESULT " + json.dumps({"seconds": time.perf_counter() - start}), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[0] == "decisions":
        decisions(args[1], args[2])
    else:
        pipeline(args[0], args[1], args[2], args[4] if len(args) > 4 else None)
