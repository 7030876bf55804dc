"""Reading pipeline YAML with errors that name the file, the line, the key and what was expected."""

from __future__ import annotations

import difflib
import re
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


#: Deepest nesting of YAML collections read (aliases followed); pipelines use a handful.
MAX_DEPTH = 64
#: Most nodes that aliases (``*name``) may add by repeating anchored nodes: a few anchors of
#: shared settings add tens; a "billion laughs" document adds billions.
MAX_ALIAS_NODES = 100_000

_INT = re.compile(r"""^(?:[-+]?0b[0-1_]+
    |[-+]?0[0-7_]+
    |[-+]?(?:0|[1-9][0-9_]*)
    |[-+]?0x[0-9a-fA-F_]+)$""", re.X)
_FLOAT = re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""", re.X)


class _Refused(yaml.MarkedYAMLError):
    """Well-formed YAML that is not read: a key twice in a mapping, nesting too deep, aliases
    that expand too far."""


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader (no Python tags) without YAML 1.1's base-60 numbers (``5:8`` stays
    a string, as in YAML 1.2), and bounded: collections nested at most ``MAX_DEPTH`` deep."""

    yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers
                if tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(problem=f"collections nested more than {MAX_DEPTH} deep",
                                problem_mark=self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_Loader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))


def _checked_tree(node: yaml.Node) -> None:
    """Refuse a composed document whose aliases make it cyclic, nest it deeper than
    ``MAX_DEPTH`` or add more than ``MAX_ALIAS_NODES`` nodes, and a mapping with a key twice.
    Each node is visited once (sizes are memoised), so a bomb is measured, never expanded."""
    sizes: dict[int, tuple[int, int]] = {}  # id -> (expanded nodes, height)
    open_: set[int] = set()

    def refused(at: yaml.Node, problem: str) -> _Refused:
        return _Refused(problem=problem, problem_mark=at.start_mark)

    def visit(node: yaml.Node, depth: int) -> tuple[int, int]:
        key = id(node)
        if key in open_:
            raise refused(node, "an alias refers to a collection that contains it")
        if key in sizes:
            size, height = sizes[key]
        else:
            children: list[yaml.Node] = []
            if isinstance(node, yaml.MappingNode):
                first: dict[tuple[str, Any], int] = {}
                for k, v in node.value:
                    if isinstance(k, yaml.ScalarNode):
                        if (k.tag, k.value) in first:
                            raise refused(k, f"duplicate key {k.value!r} (first on line "
                                          f"{first[(k.tag, k.value)]}): each key may appear "
                                          "once in a mapping")
                        first[(k.tag, k.value)] = k.start_mark.line + 1
                    children += (k, v)
            elif isinstance(node, yaml.SequenceNode):
                children = list(node.value)
            if depth + 1 > MAX_DEPTH and children:
                raise refused(node, f"collections nested more than {MAX_DEPTH} deep "
                                "(aliases followed)")
            open_.add(key)
            size, height = 1, 0
            for child in children:
                child_size, child_height = visit(child, depth + 1)
                size += child_size
                height = max(height, child_height + 1)
            open_.discard(key)
            sizes[key] = (size, height)
        if depth + height > MAX_DEPTH:
            raise refused(node, f"collections nested more than {MAX_DEPTH} deep "
                            "(aliases followed)")
        return size, height

    total, _ = visit(node, 0)
    if total - len(sizes) > MAX_ALIAS_NODES:
        raise refused(node, f"aliases (*name) expand the document by {total - len(sizes):,} "
                        f"nodes; at most {MAX_ALIAS_NODES:,} are read")


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
            if isinstance(key, yaml.ScalarNode):
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
    except IsADirectoryError:
        found = sorted(p.name for p in Path(path).glob("*.y*ml"))[:3]
        hint = f" such as {Path(path) / found[0]}" if found else ""
        raise ConfigError(f"{path}: a directory, not a pipeline file; name one YAML file{hint}"
                          ) from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the configuration file: "
                          f"{err.strerror or err}") from None
    return parse_pipeline(text, str(path), overrides or [], model)


def _compose(text: str, where: str, lines: bool = True) -> tuple[yaml.Node | None, Any]:
    """The checked node tree of one YAML document and its Python value; a ``ConfigError``
    starting with ``where`` (and the line, with ``lines``) when it is malformed or refused."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        _checked_tree(node)
        return node, loader.construct_document(node)
    except _Refused as err:
        raise ConfigError(f"{_at(where, err, lines)}: {err.problem}") from None
    except yaml.constructor.ConstructorError as err:
        tags = " (plain YAML only: no !!python or other custom tags)" if "tag" in str(
            err.problem) else ""
        raise ConfigError(f"{_at(where, err, lines)}: {err.problem}{tags}") from None
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{_at(where, err, lines)}: malformed YAML: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{where}: nested too deeply to read") from None
    finally:
        loader.dispose()


def _at(where: str, err: yaml.YAMLError, lines: bool) -> str:
    mark = getattr(err, "problem_mark", None)
    return f"{where}:{mark.line + 1}" if mark and lines else where


def parse_pipeline(text: str, source: str = "<string>", overrides: list[str] | None = None,
                   model: type[M] = PipelineModel) -> M:
    """Parse and validate pipeline YAML; every error names ``source`` and a line."""
    node, data = _compose(text, source)
    located = _Located(source, _line_map(node) if node is not None else {})
    if not isinstance(data, dict):
        raise located.error((), "expected a mapping with 'stages' (and name, output, ...)")
    for override in overrides or []:
        _apply_override(data, override, source)
    return _validate(data, located, model)


def _stage_names(raw_stages: list) -> list[str]:
    """The stages' names as the pipeline will call them (a malformed name is left to the
    stage's own validation)."""
    return resolve_names([(n if isinstance(n := s.get("name"), str) else None,
                           str(s.get("type"))) for s in raw_stages])


def _apply_override(data: dict, override: str, source: str) -> None:
    """Apply ``STAGE.PARAM=VALUE`` (or ``KEY=VALUE`` for a top-level key) to raw config."""
    key, sep, raw_value = override.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set {override!r}: expected STAGE.PARAM=VALUE")
    value = _compose(raw_value, f"--set {override!r}", lines=False)[1] if raw_value else ""
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
        if not isinstance(target, dict):
            raise ConfigError(f"--set {override!r}: {part!r} is not a mapping of parameters")
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
    if not isinstance(type_name, str):
        raise located.error(("stages", index, "type"), f"a stage's type is a name such as "
                            f"read_jsonl, not {type(type_name).__name__} {type_name!r}")
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
