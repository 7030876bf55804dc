"""``curate``: run, validate, plan, report and submit pipelines; list the stage types."""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from curator import __version__
from curator.cli_classifier import classifier_app
from curator.cli_errors import FAILED, USAGE, console, fail, one_line_errors
from curator.cli_gc import gc
from curator.cli_submit import submit
from curator.config import ConfigError, load_pipeline
from curator.report.funnel import reuse_lines
from curator.runtime.driver.requirements import MissingRequirement, check_requirements
from curator.runtime.driver.run_log import append_to_log
from curator.runtime.driver.runner import run_pipeline
from curator.store.run_dir import RunDir

app = typer.Typer(help="Curate LLM training data: run, plan, validate and report pipelines.",
                  no_args_is_help=True, pretty_exceptions_enable=False)

Sets = Annotated[list[str] | None, typer.Option("--set", help="Override STAGE.PARAM=VALUE.")]


def _load(config: Path, sets: list[str] | None):
    try:
        return load_pipeline(config, sets or [])
    except ConfigError as err:
        fail(str(err), USAGE)


def _setup_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    log = logging.getLogger("curator")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def _version(value: bool) -> None:
    if value:
        typer.echo(f"curate {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
         ) -> None:
    """Curate LLM training data: run, plan, validate and report pipelines."""


@app.command()
def run(
    config: Path,
    set_: Sets = None,
    output: Annotated[str | None, typer.Option(help="Run directory.")] = None,
    executor: Annotated[str | None, typer.Option(help="local, dask or ray.")] = None,
    workers: Annotated[int | None, typer.Option(help="Workers (at least 1).")] = None,
    scheduler: Annotated[str | None, typer.Option(help="Dask scheduler address.")] = None,
    scheduler_file: Annotated[str | None, typer.Option(help="Dask scheduler file.")] = None,
    force: Annotated[bool, typer.Option(help="Discard results of another config.")] = False,
) -> None:
    """Run a pipeline; rerunning the same command resumes where it stopped (Ctrl-C too)."""
    if workers is not None and workers < 1:
        fail(f"--workers must be at least 1; got {workers}", USAGE)
    if executor not in (None, "local", "dask", "ray"):
        fail(f"--executor must be local, dask or ray; got {executor!r}", USAGE)
    pipeline = _load(config, set_)
    _setup_logging()
    with one_line_errors():
        result = run_pipeline(pipeline, output=output, executor=executor, workers=workers,
                              scheduler=scheduler, scheduler_file=scheduler_file, force=force)
    from curator.report.funnel import funnel_table

    lines = [f"{result.shards_run} shards run, {result.shards_skipped} resumed; output in "
             f"{result.output}", *reuse_lines(result.stats.get("reuse", {})),
             *_output_lines(result.output, result.stats)]
    table = funnel_table(result.stats)
    console.print(table)
    for line in lines:
        console.print(line, highlight=False)
    record = Console(file=io.StringIO(), width=160, color_system=None)
    record.print(table)
    append_to_log(RunDir(result.output), "\n".join([record.file.getvalue(), *lines]))


def _output_lines(run_dir: Path, stats: dict) -> list[str]:
    """Where a run's Megatron shards (per tokenize stage) and its report are."""
    lines = []
    for s in stats.get("stages", []):
        if s.get("type") != "tokenize" or "blend" not in s:
            continue
        lines.append(f"Megatron shards ({s['name']}): {s['output']}  ({s.get('files', 0)} "
                     f".bin/.idx pairs, {s.get('tokens', 0):,} tokens; blend: {s['blend']})")
        total = max(s.get("tokens") or 0, 1)
        sources = sorted(((source, sum(v["tokens"] for v in splits.values()))
                          for source, splits in s.get("by_source", {}).items()),
                         key=lambda item: -item[1])
        if len(sources) > 1:
            lines.append("  tokens by source: " + ", ".join(
                f"{source} {n:,} ({n / total:.1%})" for source, n in sources))
    lines += [f"warning: {s['name']}: {w}" for s in stats.get("stages", [])
              for w in s.get("warnings", [])]
    report = RunDir(run_dir).report_file
    if report.exists():
        lines.append(f"report: {report}  (stats: {RunDir(run_dir).stats_file})")
    return lines


@app.command()
def validate(config: Path, set_: Sets = None) -> None:
    """Check a pipeline file, its stages' libraries and what they read before the run (inputs,
    models and their labels, task files); say what is wrong, where."""
    pipeline = _load(config, set_)
    later: list[str] = []  # inputs in folders not made yet (another pipeline's output)
    try:
        check_requirements(pipeline.named_stages(), later)
    except MissingRequirement as err:  # a CheckFailed too
        fail(str(err), USAGE)
    note = f"; inputs not there yet (made by another run?): {', '.join(later)}" if later else ""
    console.print(f"{config}: valid pipeline '{pipeline.name}' with {len(pipeline.stages)} "
                  f"stages{note}", highlight=False)


@app.command()
def plan(config: Path, set_: Sets = None,
         output: Annotated[str | None, typer.Option(help="Run directory.")] = None) -> None:
    """Show how stages fuse into per-shard tasks and where barriers cut; on a run directory
    that exists, what a run would reuse and compute there, per segment (nothing runs)."""
    from curator.runtime.driver.reuse_plan import reuse_plan

    pipeline = _load(config, set_)
    typer.echo(str(pipeline.plan()))
    root = output or pipeline.output
    if root:
        with one_line_errors():
            lines = reuse_plan(pipeline, root)
        typer.echo("\n".join(["", f"in {root}:", *lines]))


@app.command()
def report(run_dir: Path) -> None:
    """Print a run's funnel and write report.html beside its stats.json; of a run that is
    running or was stopped, the figures so far (marked partial)."""
    from curator.report.funnel import funnel_table, load_stats, phase_lines
    from curator.report.html import write_report
    from curator.runtime.driver.stats import partial_stats

    try:
        stats = load_stats(run_dir)
    except FileNotFoundError:
        try:
            with one_line_errors():  # run.json damaged, or a plugin stage's file gone
                stats = partial_stats(RunDir(run_dir))
        except FileNotFoundError as err:
            fail(str(err), FAILED)
    _stdout().print(funnel_table(stats))
    for line in phase_lines(stats):
        typer.echo(line)
    from curator.runtime.driver.recorded import parquet_outputs

    with one_line_errors():  # a plugin stage's file gone
        outputs = parquet_outputs(RunDir(run_dir))
    typer.echo(f"report: {write_report(run_dir, stats, outputs[-1] if outputs else None)}")


@app.command()
def show(run_dir: Path,
         stage: Annotated[str | None, typer.Option(help="Removed by this stage.")] = None,
         reason: Annotated[str | None, typer.Option(help="Removed for this reason.")] = None,
         kept: Annotated[bool, typer.Option(help="Kept documents (the run's Parquet output) "
                                           "instead of removed ones.")] = False,
         lang: Annotated[str | None, typer.Option(help="Of this language only.")] = None,
         n: Annotated[int, typer.Option("-n", help="How many.")] = 5) -> None:
    """Print sample documents of a run: removed ones (with --stage/--reason) with the text kept
    for them, or kept ones (--kept); each with its columns (scores, reason, survivor)."""
    from curator.report import show as shown
    from curator.runtime.driver.recorded import parquet_outputs

    root = RunDir(run_dir)
    if not root.is_run():
        fail(f"{run_dir} is not a curator run (no run.json)", FAILED)
    if kept:
        with one_line_errors():  # run.json damaged, or a plugin stage's file gone
            folders = parquet_outputs(root)
        if not folders:
            fail(f"{run_dir}: the run writes no Parquet output to show kept documents from",
                 FAILED)
        picked = shown.kept(folders[-1], lang, n)
    else:
        picked = shown.removed(root, stage, reason, lang, n)
    for row in picked.rows:
        for line in shown.describe(row):
            typer.echo(line)
    what = "kept" if kept else "removed"
    typer.echo(f"{len(picked.rows)} of {picked.matched:,} {what} documents shown")
    if picked.without_text:
        typer.echo(f"{picked.without_text:,} of them have no text kept: `rejected: ids` keeps the "
                   "text of a 1 % sample (curator/rejected.py); `rejected: documents` keeps all")


@app.command()
def verify(run_dir: Path) -> None:
    """Check every file a run recorded against its checksum; name each damaged one."""
    from curator.runtime.driver.verify import verify_run

    try:
        verdict = verify_run(run_dir)
    except FileNotFoundError as err:
        fail(str(err), FAILED)
    for line in verdict.damaged:
        typer.echo(line)
    if verdict.damaged:
        fail(f"{run_dir}: {len(verdict.damaged)} damaged of {verdict.checked} files checked; "
             "`curate run` with the same command recomputes what they affect", FAILED)
    typer.echo(f"{run_dir}: all {verdict.checked} recorded files whole")


@app.command()
def stages(type_name: Annotated[str | None, typer.Argument(
        metavar="[TYPE]", help="A stage type: show its parameters.")] = None) -> None:
    """List the stage types, or one type's parameters with types, defaults and help."""
    from rich.table import Table
    from rich.text import Text

    from curator.stages.base import stage_class, stage_types
    from curator.stages.catalog import description, parameters, suggestion, summary

    if type_name is None:
        width = max(map(len, stage_types()))
        for name in stage_types():
            typer.echo(f"{name:<{width}}  {summary(stage_class(name))}")
        return
    if type_name not in stage_types():
        fail(f"unknown stage type {type_name!r}" + suggestion(type_name, stage_types()), USAGE)
    cls = stage_class(type_name)
    typer.echo(f"{type_name}: {description(cls)}\n")
    table = Table("parameter", "type", "default", "help", box=None, header_style="bold")
    for param in parameters(cls):
        table.add_row(*map(Text, (param.name, param.type, param.default, param.help)))
    _stdout().print(table)


@app.command()
def serve(
    dirs: Annotated[list[Path] | None, typer.Argument(
        metavar="[DIR]...", help="Folders of runs, or runs (default: runs).")] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: a free one).", min=0, max=65535)] = 8765,
    token: Annotated[str | None, typer.Option(
        help="Access token (default: one kept in ~/.config/curator/serve-token).")] = None,
    submit: Annotated[bool, typer.Option(
        help="Accept pipeline YAMLs and run them under the first DIR (POST /api/runs).")] = False,
) -> None:
    """Serve the runs under DIR to a browser: status, live progress, reports, documents."""
    folders = dirs or [Path("runs")]
    for folder in folders:
        if not folder.is_dir():
            fail(f"{folder}: no such folder", USAGE)
    if token is not None and not token:
        fail("--token must not be empty", USAGE)
    from curator.serve.app import serve as serve_runs

    try:
        serve_runs(folders, host, port, token, submit)
    except OSError as err:
        fail(f"cannot serve on {host}:{port}: {err.strerror or err}", FAILED)
    except KeyboardInterrupt:
        pass


app.command()(submit)
app.command()(gc)


def _stdout() -> Console:
    return Console(width=None if sys.stdout.isatty() else 200, highlight=False)


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
            fail(f"{item}: no such file, or no JSONL/Parquet files in it", USAGE)
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
        fail(f"{type(err).__name__}: {err}", FAILED)
    if not seen["documents"]:
        fail(f"no text in field {text_field!r} of {len(files)} files", FAILED)
    saved = output if output.suffix == ".json" else output / "tokenizer.json"
    console.print(f"trained on {seen['documents']} documents ({seen['chars']:,} characters) "
                  f"from {len(files)} files; vocabulary {tok.get_vocab_size()}, "
                  f"end of document {EOD_TOKEN} = id {tok.token_to_id(EOD_TOKEN)}",
                  highlight=False)
    typer.echo(f"wrote {saved}  (use it as  tokenizer: {saved})")


# ---------------------------------------------------------------------------- curate classifier
app.add_typer(classifier_app, name="classifier")

if __name__ == "__main__":
    app()
