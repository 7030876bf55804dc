"""``POST /api/runs`` (``curate serve --submit``): a pipeline YAML checked and started as a run
under a served folder.

Refused: ``imports:`` (third-party code), YAML curator's own parser refuses, and any path the
pipeline would read or write outside the served folders: the output, and every stage parameter
that names a file or folder (by name, :data:`PATH_FIELDS`, checked before the stages' own
validators touch the files; then each stage's ``side_inputs()``); a writer writes inside its
run folder. A folder or glob is checked file by file, so that a link inside the served folders
cannot lead out. The run is started as
a detached ``curate run`` (or ``curate submit`` for a batch system), its YAML and terminal
output kept in the run's ``jobs/`` folder (not results: ``curate run`` accepts the folder)."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from curator.config import ConfigError, parse_pipeline
from curator.runtime.driver.run_lock import live_holder
from curator.stages.base import Sink
from curator.store.run_dir import JOBS, NOT_CONTENT, RunDir

#: Parameters (of stages, the pipeline and its executor) that name files or folders.
PATH_FIELDS = frozenset({"path", "paths", "output", "tokenizer", "model", "backbone",
                         "cache_dir", "cutpoints_from", "lists", "scheduler_file"})
#: ``curate submit`` options a request may give (``via=submit``), the first three required.
BATCH_OPTIONS = ("system", "nodes", "walltime", "resource", "group", "partition",
                 "gpus_per_node", "cpu_workers", "interface")
_OPTION_VALUE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,99}")
_GLOB = re.compile(r"[*?\[]")
#: Most files under the folders and globs of one submission that are checked; more is refused.
MAX_CHECKED = 200_000


class Refused(ValueError):
    """A submission that is not started; the message says why, in one line."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Submission:
    """A checked pipeline: where it runs, and the command that starts it."""

    output: Path
    config: Path
    log: Path
    command: list[str]
    text: str


def prepare(text: str, params: Mapping[str, str], roots: list[Path], cwd: Path) -> Submission:
    """Check a submitted pipeline YAML against the served ``roots`` (relative paths are taken
    from ``cwd``, where the run starts); :class:`Refused` says why not."""
    via = params.get("via", "run")
    if via not in ("run", "submit"):
        raise Refused(f"via must be run or submit; got {via!r}")
    roots = [r.resolve() for r in roots]
    raw = _raw(text)
    for value in _named_paths(raw, False, set()):
        check_inside(value, roots, cwd)
    try:
        pipeline = parse_pipeline(text, "<submitted>")
    except ConfigError as err:
        raise Refused(str(err).splitlines()[0]) from None
    for stage in pipeline.stages:
        for value in stage.side_inputs():
            check_inside(value, roots, cwd)
    output = _output(pipeline.output, pipeline.name, roots, cwd)
    for stage in pipeline.stages:  # a writer writes into its own run, not another one
        written = getattr(stage, "path", None) if isinstance(stage, Sink) else None
        if written and not (cwd / written).resolve().is_relative_to(output):
            raise Refused(f"{written!r}: a writer's path must be inside the run folder {output}")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    jobs = output / JOBS
    config, log = jobs / f"serve-{stamp}.yaml", jobs / f"serve-{stamp}.log"
    curate = [sys.executable, "-m", "curator"]
    if via == "run":
        command = [*curate, "run", str(config), "--output", str(output)]
    else:
        command = [*curate, "submit", str(config), "--output", str(output), *_batch(params)]
    return Submission(output, config, log, command, text)


def start(submission: Submission, cwd: Path) -> None:
    """Write the YAML and start its command detached (its own session: it outlives the
    service), its output appended to the submission's log."""
    submission.config.parent.mkdir(parents=True, exist_ok=True)
    submission.config.write_text(submission.text, encoding="utf-8")
    with open(submission.log, "ab") as log:
        proc = subprocess.Popen(submission.command, cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    threading.Thread(target=proc.wait, daemon=True).start()  # reaped when it ends


def _raw(text: str) -> dict[str, Any]:
    """The YAML as plain data, read safely, to look at before curator's parser runs: the
    parser imports ``imports:`` and stage validators open the files they name."""
    try:
        raw = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError) as err:
        problem = getattr(err, "problem", None) or type(err).__name__
        raise Refused(f"malformed YAML: {problem}") from None
    if not isinstance(raw, dict):
        raise Refused("expected a mapping with 'stages' (and name, output, ...)")
    if "imports" in raw:
        raise Refused("imports: third-party stage code is not accepted from the service")
    return raw


def _named_paths(node: Any, is_path: bool, seen: set[int]) -> Iterator[str]:
    """The strings under keys of :data:`PATH_FIELDS` (through nested mappings and lists;
    aliases visited once)."""
    if isinstance(node, dict | list):
        if id(node) in seen:
            return
        seen.add(id(node))
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _named_paths(value, key in PATH_FIELDS, seen)
    elif isinstance(node, list):
        for value in node:
            yield from _named_paths(value, is_path, seen)
    elif is_path and isinstance(node, str):
        yield node


def check_inside(value: str, roots: list[Path], cwd: Path) -> None:
    """Refuse a path, folder or glob that is, or holds, anything outside ``roots``."""
    if "://" in value or value.startswith("~") or ".." in Path(value).parts or "\0" in value:
        raise Refused(f"{value!r}: only plain paths inside the served folders are accepted")
    glob = _GLOB.search(value)
    path = cwd / value  # an absolute value stays as it is
    base = cwd / value[:glob.start()] if glob else path
    if not _within(base.resolve(), roots):
        raise Refused(f"{value!r} is outside the served folders")
    found = (Path(p) for p in _glob(str(path))) if glob else iter([path])
    checked = itertools.islice((f for p in found for f in _with_contents(p)), MAX_CHECKED + 1)
    for n, file in enumerate(checked):
        if n == MAX_CHECKED:
            raise Refused(f"{value!r}: more than {MAX_CHECKED:,} files to check")
        if not _within(file.resolve(), roots):
            raise Refused(f"{value!r}: {file} leads outside the served folders")


def _glob(pattern: str) -> Iterator[str]:
    import glob

    return glob.iglob(pattern, recursive=True)


def _with_contents(path: Path) -> Iterator[Path]:
    """``path``, and what is under it when it is a folder (links listed, not followed)."""
    yield path
    if path.is_dir() and not path.is_symlink():
        for folder, dirs, files in os.walk(path):
            yield from (Path(folder, name) for name in itertools.chain(dirs, files))


def _within(path: Path, roots: list[Path]) -> bool:
    return any(path.is_relative_to(root) for root in roots)


def _output(output: str | None, name: str, roots: list[Path], cwd: Path) -> Path:
    """The run folder: ``output``, or ``<first served folder>/<name>``; a folder directly under
    a served one (so that the service lists it), not a folder of other files, not running."""
    if output is None:
        if not _OPTION_VALUE.fullmatch(name):
            raise Refused(f"pipeline name {name!r} cannot name a folder; set 'output'")
        output = str(roots[0] / name)
    check_inside(output, roots, cwd)
    path = (cwd / output).resolve()
    if path.parent not in roots:
        raise Refused(f"output {output!r}: a run folder directly under a served folder is "
                      "needed, for the service to list it")
    if path.exists() and not RunDir(path).is_run() and any(
            c.name not in NOT_CONTENT for c in path.iterdir()):
        raise Refused(f"output {output!r} is not a curator run and is not empty", 409)
    if live_holder(path, 600.0) is not None:
        raise Refused(f"output {output!r}: a run is running there", 409)
    return path


def _batch(params: Mapping[str, str]) -> list[str]:
    """``curate submit`` options from the request's parameters."""
    missing = [k for k in BATCH_OPTIONS[:3] if not params.get(k)]
    if missing:
        raise Refused(f"via=submit needs {', '.join(missing)}")
    args = []
    for key in BATCH_OPTIONS:
        value = params.get(key)
        if value is None:
            continue
        if not _OPTION_VALUE.fullmatch(value):
            raise Refused(f"{key}: {value!r} is not a plain value")
        args += [f"--{key.replace('_', '-')}", value]
    return args
