"""``curate``: run, validate, plan and report on pipelines."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from curator.config import ConfigError, load_pipeline
from curator.runtime.rundir import RunDirError
from curator.runtime.shard_task import CurationError

app = typer.Typer(help="Curate LLM training data: run, plan, validate and report pipelines.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
console = Console(stderr=True, soft_wrap=True, width=None if sys.stderr.isatty() else 200)

Sets = Annotated[list[str] | None, typer.Option("--set", help="Override STAGE.PARAM=VALUE.")]


def _load(config: Path, sets: list[str] | None):
    try:
        return load_pipeline(config, sets or [])
    except ConfigError as err:
        console.print(f"[red]error:[/red] {err}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def _setup_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    log = logging.getLogger("curator")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


@app.command()
def run(
    config: Path,
    set_: Sets = None,
    output: Annotated[str | None, typer.Option(help="Run directory.")] = None,
    executor: Annotated[str | None, typer.Option(help="local, dask or ray.")] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes.")] = None,
    scheduler: Annotated[str | None, typer.Option(help="Dask scheduler address.")] = None,
    scheduler_file: Annotated[str | None, typer.Option(help="Dask scheduler file.")] = None,
    force: Annotated[bool, typer.Option(help="Discard results of another config.")] = False,
) -> None:
    """Run a pipeline; rerunning the same command resumes where it stopped."""
    pipeline = _load(config, set_)
    _setup_logging()
    try:
        result = pipeline.run(output=output, executor=executor, workers=workers,
                              scheduler=scheduler, scheduler_file=scheduler_file, force=force)
    except (CurationError, RunDirError, ValueError, FileNotFoundError) as err:
        console.print(f"[red]error:[/red] {err}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    from curator.report.funnel import funnel_table

    console.print(funnel_table(result.stats))
    console.print(f"{result.shards_run} shards run, {result.shards_skipped} resumed; "
                  f"output in {result.output}", highlight=False)


@app.command()
def validate(config: Path, set_: Sets = None) -> None:
    """Check a pipeline file and say what is wrong, where."""
    pipeline = _load(config, set_)
    console.print(f"{config}: valid pipeline '{pipeline.name}' with {len(pipeline.stages)} "
                  "stages", highlight=False)


@app.command()
def plan(config: Path, set_: Sets = None) -> None:
    """Show how stages fuse into per-shard tasks and where barriers cut."""
    typer.echo(str(_load(config, set_).plan()))


@app.command()
def report(run_dir: Path) -> None:
    """Print a run's funnel and write report.html beside its stats.json."""
    from curator.report.funnel import funnel_table, load_stats, write_report

    try:
        stats = load_stats(run_dir)
    except FileNotFoundError as err:
        console.print(f"[red]error:[/red] {err}", highlight=False)
        raise typer.Exit(1) from None
    Console(width=None if sys.stdout.isatty() else 200).print(funnel_table(stats))
    typer.echo(f"wrote {write_report(run_dir, stats)}")


if __name__ == "__main__":
    app()
