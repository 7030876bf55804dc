"""What ``curate stages`` shows: each stage type's summary, and a stage's parameters with their
types, defaults and help, read from the stage classes themselves (docstrings, pydantic fields)."""

from __future__ import annotations

import difflib
import re
import types
import typing
from dataclasses import dataclass
from typing import Any

from pydantic_core import PydanticUndefined

from curator.stages.base import Stage


@dataclass(frozen=True)
class Parameter:
    name: str
    type: str
    default: str  # "required" when the parameter has none
    help: str


def description(cls: type[Stage]) -> str:
    """The first paragraph of the class docstring, on one line."""
    paragraph = (cls.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(paragraph.split()).replace("``", "`")


def summary(cls: type[Stage]) -> str:
    """The first sentence of the description."""
    match = re.match(r"(.+?[.!?])(\s|$)", description(cls))
    return match.group(1) if match else description(cls)


def type_name(annotation: Any) -> str:
    """``int``, ``str | None``, ``char|word``, ``list[str]``: a type as a user writes it."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return "|".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', origin)}[{', '.join(type_name(a) for a in args)}]"
    return "None" if annotation is type(None) else getattr(annotation, "__name__", str(annotation))


def parameters(cls: type[Stage]) -> list[Parameter]:
    """The stage's parameters in declaration order."""
    params = []
    for name, field in cls.model_fields.items():
        if field.default is PydanticUndefined and field.default_factory is None:
            default = "required"
        else:
            default = repr(field.get_default(call_default_factory=True))
        params.append(Parameter(name, type_name(field.annotation), default,
                                field.description or ""))
    return params


def suggestion(word: str, choices: list[str]) -> str:
    """``; did you mean 'x'?`` for a near miss, else the list of choices."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; expected one of: {', '.join(sorted(choices))}"
