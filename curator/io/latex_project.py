"""A LaTeX project (files by relative path) -> the main file's source, inputs resolved.

Resolution is bounded: at most ``MAX_INPUT_DEPTH`` levels of \\input, and at most ``max_bytes``
of text in all (a few files that input each other many times over would otherwise expand
without end): past it :class:`InputTooLarge`."""

from __future__ import annotations

import posixpath
from collections import Counter

import regex as re

TEX_SUFFIXES = (".tex", ".ltx")
MAIN_NAMES = ("main.tex", "ms.tex", "paper.tex", "article.tex")
MAX_INPUT_DEPTH = 20
MAX_EXPANDED_BYTES = 16 << 20
EXPANSION_COST = 1024  # bytes charged per file expanded, on top of its text: bounds the calls

# A % that is not escaped (preceded by an even number of backslashes), to the end of the line.
_COMMENT = re.compile(r"(?<!\\)((?:\\\\)*)%[^\n]*")
_DOCUMENTCLASS = re.compile(r"\\documentclass\b|\\documentstyle\b")
_BEGIN_DOCUMENT = re.compile(r"\\begin\s*\{document\}")
_INPUT = re.compile(r"\\(?:input|include|subfile)\b\s*(?:\{([^{}]*)\}|([^\s\\{}%]+))")
_IMPORT = re.compile(r"\\(sub)?(?:import|inputfrom|includefrom)\*?\s*\{([^{}]*)\}\s*\{([^{}]*)\}")


class NoMainFile(ValueError):
    """A project without a LaTeX file that has \\documentclass or \\begin{document}."""


class InputTooLarge(ValueError):
    """The main file with its inputs resolved is over the size limit."""


def strip_comments(tex: str) -> str:
    """``tex`` without its comments (an escaped ``\\%`` stays); a line that held only a
    comment disappears, so no paragraph break is invented."""
    out = []
    for line in tex.split("\n"):
        stripped = _COMMENT.sub(r"\1", line)
        if stripped.strip() or not line.lstrip().startswith("%"):
            out.append(stripped)
    return "\n".join(out)


def decode(data: bytes) -> tuple[str, bool]:
    """UTF-8, else Latin-1 (older submissions); True when the fallback was used."""
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("latin-1"), True


def tex_files(files: dict[str, bytes]) -> dict[str, bytes]:
    """The LaTeX files, without macOS ``._`` AppleDouble companions."""
    return {path: data for path, data in files.items()
            if path.lower().endswith(TEX_SUFFIXES)
            and not posixpath.basename(path).startswith("._")}


def find_main_file(sources: dict[str, str]) -> str:
    """The main file: \\documentclass and \\begin{document} both beat either alone; then a
    conventional name, then a file no other file inputs, then the largest."""
    inputted = {posixpath.splitext(posixpath.normpath(name))[0]
                for text in sources.values() for name in _input_names(text)}

    def rank(path: str) -> tuple:
        text = sources[path]
        score = 2 * bool(_DOCUMENTCLASS.search(text)) + bool(_BEGIN_DOCUMENT.search(text))
        return (score, posixpath.basename(path).lower() in MAIN_NAMES,
                posixpath.splitext(path)[0] not in inputted, len(text), path)

    if not sources:
        raise NoMainFile("no .tex file in the project")
    best = max(sources, key=rank)
    if rank(best)[0] == 0:
        raise NoMainFile(f"no .tex file has \\documentclass or \\begin{{document}} "
                         f"({len(sources)} .tex files)")
    return best


def _input_names(text: str) -> list[str]:
    names = [m.group(1) or m.group(2) for m in _INPUT.finditer(text)]
    names += [posixpath.join(m.group(2), m.group(3)) for m in _IMPORT.finditer(text)]
    return [n.strip() for n in names if n and n.strip()]


def resolve_inputs(main: str, sources: dict[str, str], notes: Counter,
                   max_bytes: int = MAX_EXPANDED_BYTES) -> str:
    """The main file's text (comments stripped) with \\input, \\include, \\subfile and
    \\import replaced by the files they name; a missing file is dropped and counted, as are an
    input of a file already being expanded (``input_cycle``) and one past ``MAX_INPUT_DEPTH``
    (``input_too_deep``). Raises :class:`InputTooLarge` once the files expanded hold more than
    ``max_bytes`` (each file counted every time it is expanded, with ``EXPANSION_COST``: the
    work is bounded too)."""
    left = [max_bytes]
    stripped: dict[str, str] = {}

    def lookup(name: str, folder: str) -> str | None:
        name = name.strip().strip('"')
        for base in (folder, ""):
            path = posixpath.normpath(posixpath.join(base, name))
            for candidate in (path, path + ".tex"):
                if candidate in sources:
                    return candidate
        return None

    def expand(path: str, stack: tuple[str, ...]) -> str:
        if path not in stripped:
            stripped[path] = strip_comments(sources[path])
        text = stripped[path]
        left[0] -= len(text) + EXPANSION_COST
        if left[0] < 0:
            raise InputTooLarge(f"the main file with its inputs resolved is over {max_bytes} "
                                f"bytes (\\input expanded {path} past it)")
        folder = posixpath.dirname(path)

        def include(name: str, where: str) -> str:
            found = lookup(name, where)
            if found is None:
                notes["input_missing"] += 1
                return ""
            if found in stack:
                notes["input_cycle"] += 1
                return ""
            if len(stack) >= MAX_INPUT_DEPTH:
                notes["input_too_deep"] += 1
                return ""
            return expand(found, (*stack, found))

        text = _IMPORT.sub(lambda m: include(m.group(3), posixpath.join(
            folder if m.group(1) else "", m.group(2))), text)
        return _INPUT.sub(lambda m: include(m.group(1) or m.group(2), folder), text)

    return expand(main, (main,))
