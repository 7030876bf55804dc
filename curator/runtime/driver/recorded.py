"""The pipeline a run directory recorded (``run.json``), for commands that read a run after it
(``curate report`` of a stopped run, ``curate show``)."""

from __future__ import annotations

from pathlib import Path

from curator.pipeline import PipelineModel
from curator.stages.base import Sink
from curator.store.run_dir import RunDir


def recorded_pipeline(run_dir: RunDir) -> PipelineModel:
    """The pipeline the run directory's last run recorded (``run.json``)."""
    import yaml

    from curator.config import parse_pipeline

    return parse_pipeline(yaml.safe_dump(run_dir.recorded_config(), allow_unicode=True),
                          str(run_dir.run_file))


def parquet_outputs(run_dir: RunDir) -> list[Path]:
    """The folders of the Parquet parts the run's writers publish, in pipeline order."""
    found = [stage.parquet_parts(run_dir.root, name)
             for name, stage in recorded_pipeline(run_dir).named_stages()
             if isinstance(stage, Sink)]
    return [folder for folder, _ in (f for f in found if f) if folder.is_dir()]
