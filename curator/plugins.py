"""Third-party stages: the modules a pipeline's ``imports:`` names, loaded before its stages.

An import is a Python file (``my_stages.py``, relative to the YAML file) or a dotted module name
(``my.package``). Importing it registers the stage classes it defines (``type = "..."``).
A file is loaded as a module whose name is fixed by its absolute path, so that its classes pickle
by reference (as ``<module>.<class>``) and every process that loaded the same file resolves them:
the driver, each Dask worker (``curator.runtime.cluster.worker_imports``) and each sandbox child.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
import traceback
from pathlib import Path

_LOADED: list[str] = []


class ImportFailed(ValueError):
    """An import of the pipeline could not be loaded; ``index`` is its place in the list."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


def _is_file(spec: str) -> bool:
    """True when ``spec`` names a Python file rather than a module."""
    return spec.endswith(".py") or "/" in spec or "\\" in spec


def _resolve(spec: str, base: Path | None = None) -> str:
    """A file spec made absolute (relative to ``base``, else the working directory)."""
    if not _is_file(spec):
        return spec
    path = Path(spec).expanduser()
    return str((base or Path.cwd()) / path if not path.is_absolute() else path)


def load_imports(specs: list[str], base: Path | None = None) -> list[str]:
    """Import each spec once per process; return them resolved. Raises ``ImportFailed``."""
    resolved = [_resolve(spec, base) for spec in specs]
    for index, spec in enumerate(resolved):
        if spec in _LOADED:
            continue
        if _is_file(spec) and not Path(spec).is_file():
            raise ImportFailed(index, f"imports: {specs[index]}: no such file ({spec})")
        try:
            _load_file(spec) if _is_file(spec) else importlib.import_module(spec)
        except Exception as err:  # any error in third-party code becomes one located line
            raise ImportFailed(index, _describe(specs[index], spec, err)) from None
        _LOADED.append(spec)
    return resolved


def loaded_imports() -> list[str]:
    """The imports this process has loaded, in order (for a child process to load them too)."""
    return list(_LOADED)


def _module_name(path: str) -> str:
    """The module name a file is loaded under: its stem and a digest of its absolute path."""
    stem = re.sub(r"\W", "_", Path(path).stem)
    digest = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:10]
    return f"curator_import_{stem}_{digest}"


def _load_file(path: str) -> None:
    name = _module_name(path)
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it: pydantic and pickle look classes up here
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise


def _describe(given: str, spec: str, err: Exception) -> str:
    """One line: what was imported, where it failed, and the error."""
    where = given
    if isinstance(err, SyntaxError) and err.lineno:
        where = f"{given}:{err.lineno}"
    elif _is_file(spec):
        lines = [f.lineno for f in traceback.extract_tb(err.__traceback__)
                 if Path(f.filename) == Path(spec)]
        where = f"{given}:{lines[-1]}" if lines else given
    detail = err.msg if isinstance(err, SyntaxError) else str(err)
    return f"imports: {where}: {type(err).__name__}: {' '.join(str(detail).split())}"
