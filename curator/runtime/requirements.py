"""Optional dependencies: each stage names the modules it needs (``Stage.requirements``), and
they are looked for before anything runs, instead of failing on a worker half-way through."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

from curator.stages.base import Stage


class MissingRequirement(ImportError):
    """A stage needs a module that is not installed; the message names the extra to install."""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package, or a module without a spec
        return False


def check_requirements(stages: Iterable[tuple[str, Stage]]) -> None:
    """Raise ``MissingRequirement`` naming every (stage, module, extra) that is missing."""
    missing = [f"stage {name!r} ({stage.type}) needs {module}: pip install 'curator[{extra}]'"
               for name, stage in stages
               for module, extra in stage.requirements().items() if not _installed(module)]
    if missing:
        raise MissingRequirement("; ".join(missing))
