"""Text cleaning: Unicode repair (ftfy), optional NFKC, control characters, whitespace and
blank lines, C4-style boilerplate lines; every kind of change counted in the stage's notes."""

from __future__ import annotations

from typing import ClassVar

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, field_validator

from curator.batch import TEXT, BatchResult, split_by_reason
from curator.stages.base import BatchStage

#: C4 (Raffel et al. 2020; its POLICY_SUBSTRINGS) drops lines that mention javascript, cookie use,
#: privacy policy or terms of use, and pages with lorem ipsum; plus their usual Japanese forms.
C4_BOILERPLATE = [
    r"javascript",
    r"cookie policy|uses cookies|use of cookies|use cookies",
    r"privacy policy",
    r"terms of use",
    r"lorem ipsum",
    r"(?:クッキー|Cookie)(?:を使用|の使用|を利用|の利用|ポリシー)|プライバシーポリシー|個人情報保護方針|利用規約",
]
# Characters typical of mojibake (UTF-8 read as Latin-1 / cp1252), HTML entities, terminal
# escapes and ligatures: only documents holding one go through ftfy (the rest cannot change).
_FTFY_CANDIDATE = (r"[\x{80}-\x{ff}\x{152}\x{153}\x{160}\x{161}\x{178}\x{17d}\x{17e}\x{192}"
                   r"\x{2c6}\x{2dc}\x{2013}-\x{203a}\x{20ac}\x{2122}\x{fb00}-\x{fb06}\x{1b}]|"
                   r"&(?:#[0-9]+|#x[0-9a-fA-F]+|[a-zA-Z]+);")
# C0 and C1 controls except tab/newline/carriage return, zero-width and BOM characters
_CONTROL = r"[\x{00}-\x{08}\x{0b}\x{0c}\x{0e}-\x{1f}\x{7f}-\x{9f}\x{200b}\x{200e}\x{200f}" \
           r"\x{2060}\x{feff}]"
_SPACES = r"[ \t\x{a0}\x{2000}-\x{200a}\x{202f}\x{205f}]"


def _changed(before: pa.Array, after: pa.Array) -> int:
    return pc.sum(pc.fill_null(pc.not_equal(before, after), False)).as_py() or 0


class Clean(BatchStage):
    """Repair and normalise text, in this order: ftfy (mojibake, HTML entities, terminal escapes,
    ligatures; quotes and character widths left alone), NFC or NFKC, control and zero-width
    characters removed, boilerplate lines dropped, line breaks made ``\\n``, spaces and blank
    lines collapsed, the text stripped. A document left empty is removed (``empty_after_clean``).
    Notes count the documents each step changed and the lines and characters it removed."""

    type = "clean"
    rewrites_text = True
    requires: ClassVar[dict[str, str]] = {"ftfy": "clean"}

    fix_unicode: bool = Field(True, description="Repair mojibake, HTML entities and other "
                              "broken Unicode with ftfy.")
    nfkc: bool = Field(False, description="NFKC instead of NFC (full-width ASCII and half-width "
                       "katakana in Japanese text become their usual forms).")
    remove_control: bool = Field(True, description="Remove control characters (tab and line "
                                 "breaks kept), zero-width characters and BOMs.")
    boilerplate: list[str] = Field(
        default_factory=lambda: list(C4_BOILERPLATE),
        description="Regular expressions (RE2, case-insensitive): a line matching any is "
        "dropped. Default: C4's (javascript, cookies, privacy policy, terms of use, lorem "
        "ipsum) and their Japanese forms; [] keeps every line.")
    collapse_spaces: bool = Field(True, description="Runs of spaces and tabs become one space; "
                                  "spaces at line ends removed.")
    max_blank_lines: int = Field(1, ge=0, description="Consecutive blank lines kept at most.")

    @field_validator("boilerplate")
    @classmethod
    def _check_patterns(cls, value: list[str]) -> list[str]:
        probe = pa.array(["x"])
        for pattern in value:
            try:
                pc.match_substring_regex(probe, pattern)
            except pa.ArrowInvalid as err:
                raise ValueError(f"boilerplate pattern {pattern!r}: {err}") from None
        return value

    def _ftfy(self, text: pa.Array) -> pa.Array:
        import ftfy

        candidate = pc.fill_null(pc.match_substring_regex(text, _FTFY_CANDIDATE), False)
        if not pc.any(candidate).as_py():
            return text
        config = ftfy.TextFixerConfig(uncurl_quotes=False, fix_character_width=False,
                                      fix_line_breaks=False, remove_control_chars=False,
                                      normalization=None, explain=False)
        values = text.to_pylist()
        for i in pc.indices_nonzero(candidate).to_pylist():
            values[i] = ftfy.fix_text(values[i], config)
        return pa.array(values, pa.string())

    def clean(self, text: pa.Array) -> tuple[pa.Array, dict[str, int]]:
        """Cleaned texts and the counts of what changed."""
        notes: dict[str, int] = {}
        text = text.cast(pa.string())
        if self.fix_unicode:
            fixed = self._ftfy(text)
            notes["docs_unicode_fixed"] = _changed(text, fixed)
            text = fixed
        form = "NFKC" if self.nfkc else "NFC"
        normal = pc.utf8_normalize(text, form)
        notes[f"docs_{form.lower()}_changed"] = _changed(text, normal)
        text = normal
        if self.remove_control:
            notes["control_chars_removed"] = pc.sum(
                pc.count_substring_regex(text, _CONTROL)).as_py() or 0
            text = pc.replace_substring_regex(text, _CONTROL, "")
        text = pc.replace_substring_regex(text, r"\r\n?|[\x{2028}\x{2029}\x{85}]", "\n")
        if self.boilerplate:
            line = "(?im)^[^\n]*(?:" + "|".join(f"(?:{p})" for p in self.boilerplate) + \
                   ")[^\n]*(?:\n|\\z)"
            notes["boilerplate_lines_removed"] = pc.sum(
                pc.count_substring_regex(text, line)).as_py() or 0
            text = pc.replace_substring_regex(text, line, "")
        before = text
        if self.collapse_spaces:
            text = pc.replace_substring_regex(text, _SPACES + "+", " ")
            text = pc.replace_substring_regex(text, "(?m) +$", "")
        text = pc.replace_substring_regex(text, "(?m)^[ \t]+$", "")
        text = pc.replace_substring_regex(text, f"\n{{{self.max_blank_lines + 2},}}",
                                          "\n" * (self.max_blank_lines + 1))
        text = pc.utf8_trim_whitespace(text)
        notes["docs_whitespace_normalised"] = _changed(before, text)
        return text, notes

    def process(self, batch: pa.Table) -> BatchResult:
        text, notes = self.clean(batch.column(TEXT).combine_chunks())
        batch = batch.set_column(batch.schema.get_field_index(TEXT), TEXT, text)
        empty = pc.fill_null(pc.equal(pc.utf8_length(text), 0), True)
        result = split_by_reason(batch, pc.if_else(empty, pa.scalar("empty_after_clean"),
                                                   pa.scalar(None, pa.string())))
        result.notes = {k: v for k, v in notes.items() if v}
        return result
