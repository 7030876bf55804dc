"""The default language-ID model: fastText's ``lid.176.ftz``, shipped inside curator as package
data (``curator/stages/data/``, CC BY-SA 3.0: ``LICENSE-lid.176.md`` beside it names the authors
and the licence). Nothing is downloaded; the module ``fasttext`` that reads it comes from the
``langid`` extra (fasttext-numpy2-wheel)."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).parent / "data"
MODEL = DATA / "lid.176.ftz"
LICENCE = DATA / "LICENSE-lid.176.md"


def bundled_model() -> Path:
    """The path of the shipped ``lid.176.ftz``; a one-line ValueError when it is missing (an
    installation built without curator's package data)."""
    if not MODEL.is_file():
        raise ValueError(f"the default language-ID model {MODEL} is missing (curator installed "
                         "without its package data?): reinstall curator, or set model: to a "
                         "fastText model file")
    return MODEL
