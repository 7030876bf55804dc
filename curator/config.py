"""Reading pipeline YAML with errors that name the file, the line, the key and what was expected."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from curator.pipeline import PipelineModel, resolve_names
from curator.plugins import ImportFailed, load_imports
from curator.stages.base import Stage, stage_class, stage_types

Path_ = tuple[Any, ...]
M = TypeVar("M", bound=PipelineModel)


class ConfigError(ValueError):
    """A configuration mistake; the message says where and what was expected."""


def _suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; expected one of: {', '.join(sorted(choices))}"


def _line_map(node: yaml.Node, path: Path_ = (), lines: dict | None = None) -> dict[Path_, int]:
    """Map each key path of a composed YAML document to its 1-based line."""
    lines = {} if lines is None else lines
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            lines[(*path, key.value)] = key.start_mark.line + 1
            _line_map(value, (*path, key.value), lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _line_map(item, (*path, i), lines)
    return lines


class _Located:
    """Turns a key path into ``file:line`` using the YAML line map."""

    def __init__(self, source: str, lines: dict[Path_, int]) -> None:
        self.source, self.lines = source, lines

    def error(self, path: Path_, message: str) -> ConfigError:
        for cut in range(len(path), -1, -1):
            if path[:cut] in self.lines:
                return ConfigError(f"{self.source}:{self.lines[path[:cut]]}: {message}")
        return ConfigError(f"{self.source}: {message}")


def load_pipeline(path: str | Path, overrides: list[str] | None = None,
                  model: type[M] = PipelineModel) -> M:
    """Read a pipeline YAML file, apply ``--set`` overrides, and validate it as ``model``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    return parse_pipeline(text, str(path), overrides or [], model)


def parse_pipeline(text: str, source: str = "<string>", overrides: list[str] | None = None,
                   model: type[M] = PipelineModel) -> M:
    """Parse and validate pipeline YAML; every error names ``source`` and a line."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        raise ConfigError(f"{where}: malformed YAML: {getattr(err, 'problem', err)}") from None
    located = _Located(source, _line_map(node) if node is not None else {})
    if not isinstance(data, dict):
        raise located.error((), "expected a mapping with 'stages' (and name, output, ...)")
    for override in overrides or []:
        _apply_override(data, override, source)
    return _validate(data, located, model)


def _stage_names(raw_stages: list) -> list[str]:
    return resolve_names([(s.get("name"), str(s.get("type"))) for s in raw_stages])


def _apply_override(data: dict, override: str, source: str) -> None:
    """Apply ``STAGE.PARAM=VALUE`` (or ``KEY=VALUE`` for a top-level key) to raw config."""
    key, sep, raw_value = override.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set {override!r}: expected STAGE.PARAM=VALUE")
    value = yaml.safe_load(raw_value) if raw_value else ""
    head, _, rest = key.partition(".")
    stages = data.get("stages") if isinstance(data.get("stages"), list) else []
    stages = [s for s in stages if isinstance(s, dict)]
    names = _stage_names(stages)
    if head in names and rest:
        target, parts = stages[names.index(head)], rest.split(".")
    elif head in PipelineModel.model_fields and head != "stages":
        target, parts = data, key.split(".")
    else:
        raise ConfigError(f"--set {override!r}: no stage named {head!r} in {source}"
                          + _suggest(head, names))
    for part in parts[:-1]:
        target = target.setdefault(part, {})
    target[parts[-1]] = value


def _validate(data: dict, located: _Located, model: type[M]) -> M:
    for key in data:
        if key not in PipelineModel.model_fields:
            raise located.error((key,), f"unknown key {key!r}"
                                + _suggest(str(key), list(PipelineModel.model_fields)))
    raw_stages = data.get("stages")
    if not isinstance(raw_stages, list) or not raw_stages:
        raise located.error(("stages",), "'stages' must be a non-empty list of stages")
    for i, raw in enumerate(raw_stages):
        if not isinstance(raw, dict) or "type" not in raw:
            raise located.error(("stages", i), "each stage must be a mapping with a 'type'")
    if "imports" in data:
        data["imports"] = _imports(data["imports"], located)
    names = _stage_names(raw_stages)
    stages = [_build_stage(raw, i, names[i], located) for i, raw in enumerate(raw_stages)]
    try:
        return model(**{**data, "stages": stages})
    except ValidationError as err:
        first = err.errors()[0]
        path = tuple(first["loc"])
        raise located.error(path, f"{'.'.join(map(str, path)) or 'pipeline'}: {first['msg']}") \
            from None


def _imports(raw: Any, located: _Located) -> list[str]:
    """Import the modules of third-party stages (files relative to the YAML file)."""
    if not isinstance(raw, list) or not all(isinstance(i, str) for i in raw):
        raise located.error(("imports",), "'imports' must be a list of Python files or modules")
    source = Path(located.source)
    try:
        return load_imports(raw, source.resolve().parent if source.is_file() else None)
    except ImportFailed as err:
        raise located.error(("imports", err.index), str(err)) from None


def _build_stage(raw: dict, index: int, name: str, located: _Located) -> Stage:
    type_name = raw["type"]
    if type_name not in stage_types():
        raise located.error(("stages", index, "type"),
                            f"unknown stage type {type_name!r}" + _suggest(str(type_name),
                                                                             stage_types()))
    cls = stage_class(type_name)
    params = {k: v for k, v in raw.items() if k != "type"}
    try:
        return cls.model_validate(params)
    except ValidationError as err:
        first = err.errors()[0]
        loc = tuple(first["loc"])
        path = ("stages", index, *loc)
        field = str(loc[0]) if loc else ""
        if first["type"] == "extra_forbidden":
            message = (f"unknown parameter {field!r} for stage {name!r}"
                       + _suggest(field, [f for f in cls.model_fields if f != "name"]))
        elif first["type"] == "missing":
            message = f"stage {name!r} ({type_name}) needs parameter {field!r}"
        else:
            shown = f" (got {first['input']!r})" if "input" in first and loc else ""
            target = f"parameter {field!r}" if field else "parameters"
            message = f"stage {name!r} ({type_name}), {target}: {first['msg']}{shown}"
        raise located.error(path, message) from None
