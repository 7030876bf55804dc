"""What is checked before anything runs (``curate validate`` and the start of ``curate run``),
instead of failing on a worker half-way through: each stage's optional dependencies
(``Stage.requirements``), then each stage's own ``check`` (inputs that match no file, a language
or label its model does not have, a missing task file)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from pathlib import Path

from curator.stages.base import FileSource, Stage


class MissingRequirement(ImportError):
    """A stage needs a module that is not installed; the message names the extra to install.
    ``curate`` ends with exit status 2 (bad configuration) on it and on its subclasses."""


class CheckFailed(MissingRequirement, ValueError):
    """A stage's ``check`` found a mistake in its configuration: exit status 2, like a missing
    requirement (a ``ValueError`` too, for callers of the Python API)."""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package, or a module without a spec
        return False


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _problem(stage: Stage, later: list[str] | None) -> str | None:
    """What the stage's checks find wrong, as one line; None when nothing."""
    try:
        stage.check()
    except (ValueError, OSError) as err:
        return _one_line(err)
    if not isinstance(stage, FileSource):
        return None
    from curator.io.files import list_shards

    patterns = [stage.path] if isinstance(stage.path, str) else list(stage.path)
    if later is not None:  # inputs in a folder not made yet: another run's output, perhaps
        due = [p for p in patterns if not _folder_exists(p)]
        later += due
        patterns = [p for p in patterns if p not in due]
    try:
        if patterns:
            list_shards(patterns)  # as the run lists them
    except (ValueError, OSError) as err:
        return _one_line(err)
    except Exception as err:  # a file system's own error (a remote listing refused)
        return f"cannot list {patterns!r}: {type(err).__name__}: {_one_line(err)}"
    return None


def _folder_exists(pattern: str) -> bool:
    """Whether the local folder that ``pattern`` lists exists (True for a URL: not known)."""
    from curator.io.files import GLOB_CHARS

    if "://" in pattern and not pattern.startswith("file://"):
        return True
    local = pattern.removeprefix("file://")
    cut = min((local.find(c) for c in GLOB_CHARS if c in local), default=len(local))
    head = local[:cut]
    return Path(head[: head.rfind("/") + 1] or ".").expanduser().is_dir()


def check_requirements(stages: Iterable[tuple[str, Stage]], later: list[str] | None = None
                       ) -> None:
    """Raise ``MissingRequirement`` naming every (stage, module, extra) that is missing; then
    ``CheckFailed`` naming every stage whose ``check`` fails, with why (one line), and every file
    source whose inputs match no file. With ``later`` (``curate validate``), inputs in a folder
    that does not exist yet are appended to it instead: another pipeline's output, made before
    this one runs; the run itself refuses them."""
    stages = list(stages)
    missing = [f"stage {name!r} ({stage.type}) needs {module}: pip install 'curator[{extra}]'"
               for name, stage in stages
               for module, extra in stage.requirements().items() if not _installed(module)]
    if missing:
        raise MissingRequirement("; ".join(missing))
    problems = [f"stage {name!r} ({stage.type}): {problem}" for name, stage in stages
                if (problem := _problem(stage, later)) is not None]
    if problems:
        raise CheckFailed("; ".join(problems))
