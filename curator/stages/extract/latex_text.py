"""LaTeX source -> prose: the RedPajama arXiv cleaning steps done on the source (comments,
argument-less macros, preamble, bibliography), then pylatexenc's parser for the markup.

Math stays as written (``$...$``, ``\\[...\\]``, equation environments), as RedPajama and
Dolma keep it; \\label and parenthetical citations disappear, textual citations become
``[cite]``, references ``[ref]``; figures and tables become their captions.
docs/sources.md says why.

Bounded on hostile input: a text over ``MAX_LATEX_CHARS`` is refused, and macro expansion stops
with an error before the text would grow past ``MAX_GROWTH`` times (plus ``GROWTH_SLACK``) its
size (``\\def\\a{\\a\\a\\a}`` used a few times would otherwise fill memory). The time a
document may take is the stage's ``timeout_s``.
"""

from __future__ import annotations

from functools import lru_cache

import regex as re

from curator.io.latex_project import strip_comments

MAX_EXPANSION_ROUNDS = 5
MAX_LATEX_CHARS = 16 << 20
MAX_GROWTH = 4
GROWTH_SLACK = 1 << 20


class LatexTooLarge(ValueError):
    """A document over the size limit, or one whose macros expand past it."""

_DEFINITION = re.compile(
    r"\\(?:(?:re|provide)?newcommand\*?|DeclareRobustCommand\*?|DeclareMathOperator\*?)\s*"
    r"(?:\{\s*\\([A-Za-z@]+)\s*\}|\\([A-Za-z@]+))\s*(\[[^\]]*\])?(\[[^\]]*\])?\s*(?=\{)"
    r"|\\[gex]?def\s*\\([A-Za-z@]+)\s*([^{]*)(?=\{)")
_ENV_DEFINITION = re.compile(r"\\(?:re)?newenvironment\*?\s*\{[^{}]*\}\s*(?:\[[^\]]*\]\s*)*")
_LET = re.compile(r"\\let\s*\\[A-Za-z@]+\s*=?\s*\\[A-Za-z@]+")
_SECTION = re.compile(r"\\(?:part|chapter|section|subsection)\*?\s*[\[{]")
_BEGIN_DOCUMENT = re.compile(r"\\begin\s*\{document\}")
_ABSTRACT = re.compile(r"\\begin\s*\{abstract\}(.*?)\\end\s*\{abstract\}", re.S)
_BIBLIOGRAPHY = re.compile(
    r"\\begin\s*\{thebibliography\}|\\bibliography\s*\{|\\printbibliography\b"
    r"|\\(?:section|chapter)\*?\s*\{\s*(?:References|Bibliography)\s*\}|\\end\s*\{document\}")
_FLOAT = re.compile(r"\\begin\s*\{(figure|table|wrapfigure|wraptable|sidewaysfigure"
                    r"|sidewaystable)(\*?)\}(.*?)\\end\s*\{\1\2\}", re.S)
_CAPTION = re.compile(r"\\caption\*?\s*(?:\[[^\]]*\])?\s*(?=\{)")
_TABULAR = re.compile(r"\\begin\s*\{(tabular[xy*]?|longtable|tikzpicture|algorithmic|algorithm"
                      r"|lstlisting|verbatim)\}.*?\\end\s*\{\1\}", re.S)
_OWN_LINE = re.compile(r"\\begin\{|\\end\{|\\\[|\\\]|\$\$|\* |- |\d+\. ")
_DISPLAY_END = re.compile(r"\\end\{[^}]*\}$|\\\]$|\$\$$")
_BLANK_LINES = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")
_SPACES = re.compile(r"[ \t\xa0]+")
_MACRO_NAME_END = r"(?![A-Za-z@])"
_LINEBREAK_SPACING = re.compile(r"(?<!\\)\\\\\*?\s*\[\s*-?[\d.]+\s*[a-z]{2}\s*\]")
# What \cite and \xspace leave, settled once the text is out: a citation takes the space before
# it with it ("detections \cite{x}." -> "detections."); \xspace is a space unless punctuation or
# a space follows.
_CITE_MARK, _XSPACE_MARK = "\x00", "\x01"
_CITE_GAP = re.compile(r"[ \t\xa0]*\n?[ \t\xa0]*\x00+")
_XSPACE = re.compile(r"\x01(?=[\s.,;:!?)\]'\x01]|$)")


def braced(text: str, start: int) -> tuple[str, int]:
    """The content of the brace group opening at ``text[start]`` and the index after it (an
    unbalanced group runs to the end)."""
    depth, i = 0, start
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1:i], i + 1
        i += 1
    return text[start + 1:], len(text)


def expand_macros(tex: str) -> str:
    """Remove every macro and environment definition; expand the argument-less ones
    (\\newcommand{\\x}{...}, \\def\\x{...}) wherever they are used."""
    bodies: dict[str, str] = {}
    out, position = [], 0
    for match in _DEFINITION.finditer(tex):
        if match.start() < position:
            continue
        body, end = braced(tex, match.end())
        name = match.group(1) or match.group(2) or match.group(5)
        takes_args = bool(match.group(3)) or bool((match.group(6) or "").strip())
        if match.group(0).lstrip("\\").startswith("DeclareMathOperator"):
            body = f"\\operatorname{{{body}}}"
        if not takes_args:
            bodies[name] = body
        out.append(tex[position:match.start()])
        position = end
    out.append(tex[position:])
    tex = "".join(out)
    tex = _remove_env_definitions(tex)
    tex = _LET.sub("", tex)
    if not bodies:
        return tex
    usage = re.compile(r"\\(" + "|".join(map(re.escape, sorted(bodies, key=len, reverse=True)))
                       + r")" + _MACRO_NAME_END)
    cap = MAX_GROWTH * len(tex) + GROWTH_SLACK
    for _ in range(MAX_EXPANSION_ROUNDS):
        growth = sum(len(bodies[m.group(1)]) - len(m.group(0)) for m in usage.finditer(tex))
        if len(tex) + growth > cap:
            raise LatexTooLarge(f"macro expansion would grow the text past {cap} characters")
        expanded = usage.sub(lambda m: bodies[m.group(1)], tex)
        if expanded == tex:
            break
        tex = expanded
    return tex


def _remove_env_definitions(tex: str) -> str:
    """\\newenvironment{name}[n]{begin}{end}: the definition goes, uses stay (their text)."""
    out, position = [], 0
    for match in _ENV_DEFINITION.finditer(tex):
        if match.start() < position:
            continue
        end = match.end()
        for _ in range(2):
            if end < len(tex) and tex[end] == "{":
                _, end = braced(tex, end)
                while end < len(tex) and tex[end] in " \t\n":
                    end += 1
        out.append(tex[position:match.start()])
        position = end
    out.append(tex[position:])
    return "".join(out)


def body(tex: str, keep_abstract: bool = True) -> str:
    """The abstract (when there is one and ``keep_abstract``) and the text from the first
    section to the bibliography (or \\end{document})."""
    first = _SECTION.search(tex)
    start = first.start() if first else None
    if start is None:
        document = _BEGIN_DOCUMENT.search(tex)
        start = document.end() if document else 0
    abstract = _ABSTRACT.search(tex, 0, start)
    text = tex[start:]
    if cut := _BIBLIOGRAPHY.search(text):
        text = text[:cut.start()]
    if keep_abstract and abstract and abstract.group(1).strip():
        text = f"\\section*{{Abstract}}\n{abstract.group(1).strip()}\n\n{text}"
    return text


def floats_to_captions(tex: str) -> str:
    """Figures and tables become their captions; tabulars, pictures and listings go."""
    def captions(match: re.Match) -> str:
        inner = match.group(3)
        found = [braced(inner, m.end())[0] for m in _CAPTION.finditer(inner)]
        return "".join(f"\n\n{c.strip()}\n\n" for c in found if c.strip())

    return _TABULAR.sub("", _FLOAT.sub(captions, tex))


# Layout and bookkeeping macros whose arguments are no text: dropped with their arguments.
DISCARDED_WITH_ARGS = {
    "bibliographystyle": "{", "setlength": "{{", "addtolength": "{{", "setcounter": "{{",
    "addtocounter": "{{", "addcontentsline": "{{{", "hypersetup": "{", "graphicspath": "{",
    "pagestyle": "{", "thispagestyle": "{", "newtheorem": "*{[{[", "theoremstyle": "{",
    "numberwithin": "{{", "crefname": "{{{", "Crefname": "{{{", "definecolor": "{{{",
    "usetikzlibrary": "{", "captionsetup": "[{", "renewcommand": "*{[[{", "vskip": "",
    "linespread": "{", "fontsize": "{{", "selectfont": "", "resizebox": "*{{",
}


@lru_cache(maxsize=1)
def _converter():
    from pylatexenc import latex2text, latexwalker, macrospec

    def argument(index: int, before: str = "", after: str = ""):
        def text(node, l2tobj) -> str:
            args = node.nodeargd.argnlist if node.nodeargd else []
            arg = args[index] if -len(args) <= index < len(args) else None
            inner = l2tobj.nodelist_to_text([arg]).strip() if arg is not None else ""
            return f"{before}{inner}{after}" if inner else ""
        return text

    heading = argument(-1, "\n\n", "\n\n")

    walker_db = latexwalker.get_default_latex_context_db()
    walker_db.add_context_category("curator", prepend=True, macros=[
        *(macrospec.MacroSpec(name, "*[[{") for name in (
            "cite", "citet", "Citet", "citep", "citealp", "citealt", "citeauthor", "Citeauthor",
            "citeyear", "parencite", "autocite", "footcite", "textcite", "Textcite", "nocite")),
        *(macrospec.MacroSpec(name, "*{") for name in (
            "cref", "Cref", "autoref", "nameref", "pageref", "vref", "thanks", "affiliation",
            "email", "orcid", "keywords")),
        *(macrospec.MacroSpec(name, args) for name, args in DISCARDED_WITH_ARGS.items()),
        macrospec.MacroSpec("caption", "*[{"),
        macrospec.MacroSpec("href", "{{"),
        macrospec.MacroSpec("texttt", "{"),
    ])
    text_db = latex2text.get_default_latex_context_db()
    marks = {"xspace": _XSPACE_MARK, "TeX": "TeX", "LaTeX": "LaTeX", "LaTeXe": "LaTeX2e",
             "BibTeX": "BibTeX", "ie": "i.e.", "eg": "e.g.", "etal": "et al."}
    refs = ("ref", "eqref", "cref", "Cref", "autoref", "nameref", "vref", "pageref")
    cites = ("cite", "citep", "citealp", "nocite", "parencite", "autocite", "footcite")
    textual_cites = ("citet", "Citet", "citealt", "citeauthor", "Citeauthor", "citeyear",
                     "textcite", "Textcite")
    gone = ("label", "thanks", "affiliation", "email", "orcid", "keywords",
            "includegraphics", "bibliographystyle", "newpage", "clearpage", "maketitle",
            "tableofcontents", "appendix", "centering", "noindent", "medskip", "smallskip",
            "bigskip", "vfill", "hfill", "linebreak", "pagebreak", "FloatBarrier",
            "acknowledgments")
    text_db.add_context_category("curator", prepend=True, macros=[
        *(latex2text.MacroTextSpec(name, simplify_repl=heading) for name in (
            "part", "chapter", "section", "subsection", "subsubsection", "paragraph")),
        *(latex2text.MacroTextSpec(name, simplify_repl="[ref]") for name in refs),
        *(latex2text.MacroTextSpec(name, simplify_repl="") for name in gone),
        *(latex2text.MacroTextSpec(name, simplify_repl="") for name in DISCARDED_WITH_ARGS),
        *(latex2text.MacroTextSpec(name, simplify_repl=_CITE_MARK) for name in cites),
        *(latex2text.MacroTextSpec(name, simplify_repl="[cite]") for name in textual_cites),
        *(latex2text.MacroTextSpec(name, simplify_repl=text) for name, text in marks.items()),
        *(latex2text.MacroTextSpec(name, simplify_repl=argument(-1)) for name in (
            "texttt", "textsc", "textsf", "textrm", "textmd", "textup", "textnormal", "mbox",
            "hbox", "text", "underline")),
        latex2text.MacroTextSpec("caption", simplify_repl=argument(-1)),
        latex2text.MacroTextSpec("href", simplify_repl=argument(1)),
        latex2text.MacroTextSpec("url", simplify_repl=argument(0)),
        latex2text.MacroTextSpec("footnote", simplify_repl=argument(-1, " (", ")")),
    ])
    converter = latex2text.LatexNodes2Text(latex_context=text_db, math_mode="verbatim",
                                           strict_latex_spaces=True)
    return converter, walker_db


def latex_to_text(tex: str, keep_abstract: bool = True) -> str:
    """Prose from a LaTeX document (see the module docstring for what is kept)."""
    from pylatexenc import latexwalker

    if len(tex) > MAX_LATEX_CHARS:
        raise LatexTooLarge(f"{len(tex)} characters, over {MAX_LATEX_CHARS}")
    tex = floats_to_captions(body(expand_macros(strip_comments(tex)), keep_abstract))
    tex = _LINEBREAK_SPACING.sub(r"\\\\", tex)
    converter, walker_db = _converter()
    walker = latexwalker.LatexWalker(tex, latex_context=walker_db, tolerant_parsing=True)
    nodes, _, _ = walker.get_latex_nodes()
    text = converter.nodelist_to_text(nodes)
    text = _XSPACE.sub("", _CITE_GAP.sub("", text)).replace(_XSPACE_MARK, " ")
    text = _SPACES.sub(" ", text)
    lines = "\n".join(line.strip() for line in text.split("\n"))
    paragraphs = _BLANK_LINES.sub("\n\n", lines).strip().split("\n\n")
    return "\n\n".join(_reflow(p) for p in paragraphs)


def _reflow(paragraph: str) -> str:
    """A paragraph's source lines joined into one (a single newline is a space in LaTeX),
    except around display math and list items, which keep lines of their own."""
    out: list[str] = []
    for line in paragraph.split("\n"):
        if out and not _OWN_LINE.match(line) and not _OWN_LINE.match(out[-1]) \
                and not _DISPLAY_END.search(out[-1]):
            out[-1] += " " + line
        else:
            out.append(line)
    return "\n".join(out)


_MATH = re.compile(r"\$\$.*?\$\$|\$.*?\$|\\\[.*?\\\]|\\\(.*?\\\)"
                   r"|\\begin\{((?:equation|align|alignat|flalign|gather|multline|eqnarray"
                   r"|displaymath|math|split|dmath)\*?)\}.*?\\end\{\1\}", re.S)
_COMMAND = re.compile(r"\\[A-Za-z@]+")


def leftover_commands(text: str) -> tuple[int, int]:
    """(tokens, tokens holding a LaTeX command) of ``text`` outside math; tokens are
    whitespace-separated words."""
    prose = _MATH.sub(" ", text)
    math_tokens = sum(len(m.group(0).split()) for m in _MATH.finditer(text))
    words = prose.split()
    return len(words) + math_tokens, sum(1 for w in words if _COMMAND.search(w))


def stray_braces(text: str) -> int:
    """Tokens outside math that hold a brace (markup a conversion left behind)."""
    return sum(1 for w in _MATH.sub(" ", text).split() if "{" in w or "}" in w)
