"""The load-and-run facade for the Python builder: a pipeline model that reads YAML and runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curator.config import load_pipeline, parse_pipeline
from curator.pipeline import PipelineModel
from curator.runtime.driver.runner import RunResult, run_pipeline


class Pipeline(PipelineModel):
    """A pipeline you can build in Python, write as YAML, read back, and run.

    ``Pipeline([ReadJsonl(path=...), LengthFilter(min_chars=200), WriteParquet()],
    output="runs/x").run()``; ``Pipeline.from_yaml(p.to_yaml()) == p``."""

    @classmethod
    def from_yaml(cls, text: str, source: str = "<string>") -> Pipeline:
        return parse_pipeline(text, source, model=cls)

    @classmethod
    def from_file(cls, path: str | Path, overrides: list[str] | None = None) -> Pipeline:
        return load_pipeline(path, overrides or [], model=cls)

    def run(self, **options: Any) -> RunResult:
        """Run the pipeline; options as for ``curate run`` (output, executor, workers, force...).
        In a script, call it under ``if __name__ == "__main__":`` (Dask's worker processes
        import the script again)."""
        return run_pipeline(self, **options)
