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
from curator.runtime.runner import run_pipeline
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
        result = run_pipeline(pipeline, output=output, executor=executor, workers=workers,
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



# ---------------------------------------------------------------------------- curate tokenizer
tokenizer_app = typer.Typer(help="Tokenizers for the tokenize stage.", no_args_is_help=True)
app.add_typer(tokenizer_app, name="tokenizer")

_TEXT_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz", ".jsonl.zst", ".ndjson")


def _expand_inputs(inputs: list[str]) -> list[Path]:
    """Files named directly, by a glob, or held by a directory (a run's writer output)."""
    import glob

    files: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.name.endswith(_TEXT_SUFFIXES))
        elif any(c in item for c in "*?["):
            found = [Path(p) for p in sorted(glob.glob(item, recursive=True))]
        else:
            found = [path] if path.is_file() else []
        if not found:
            console.print(f"[red]error:[/red] {item}: no such file, or no JSONL/Parquet files "
                          "in it", highlight=False)
            raise typer.Exit(2)
        files += found
    return files


@tokenizer_app.command("train")
def tokenizer_train(
    inputs: Annotated[list[str], typer.Argument(
        help="JSONL (.gz/.zst) or Parquet files, globs, or directories such as "
        "runs/x/write_parquet.")],
    vocab_size: Annotated[int, typer.Option(
        help="Vocabulary size; rounded up to a multiple of 128.", min=1)],
    output: Annotated[Path, typer.Option(
        help="Directory to hold tokenizer.json (or a .json file name).")],
    text_field: Annotated[str, typer.Option(help="Field or column holding the text.")] = "text",
    min_frequency: Annotated[int, typer.Option(help="Least count of a merged pair.")] = 2,
) -> None:
    """Train a byte-level BPE tokenizer (Hugging Face tokenizers) on curated output."""
    from curator.tokenization.training import EOD_TOKEN, iter_texts, round_vocab_size, train_bpe

    files = _expand_inputs(inputs)
    target = round_vocab_size(vocab_size)
    if target != vocab_size:
        console.print(f"vocabulary {vocab_size} rounded up to {target} (a multiple of 128, as "
                      "the trainer pads to and FP8 needs)", highlight=False)
    seen = {"documents": 0, "chars": 0}

    def texts():
        for text in iter_texts(files, text_field):
            seen["documents"] += 1
            seen["chars"] += len(text)
            yield text

    try:
        tok = train_bpe(target, texts=texts(), output=output, min_frequency=min_frequency)
    except (OSError, ValueError, KeyError) as err:
        console.print(f"[red]error:[/red] {type(err).__name__}: {err}", highlight=False)
        raise typer.Exit(1) from None
    if not seen["documents"]:
        console.print(f"[red]error:[/red] no text in field {text_field!r} of {len(files)} "
                      "files", highlight=False)
        raise typer.Exit(1)
    saved = output if output.suffix == ".json" else output / "tokenizer.json"
    console.print(f"trained on {seen['documents']} documents ({seen['chars']:,} characters) "
                  f"from {len(files)} files; vocabulary {tok.get_vocab_size()}, "
                  f"end of document {EOD_TOKEN} = id {tok.token_to_id(EOD_TOKEN)}",
                  highlight=False)
    typer.echo(f"wrote {saved}  (use it as  tokenizer: {saved})")


if __name__ == "__main__":
    app()
