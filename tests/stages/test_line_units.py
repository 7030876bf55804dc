# ruff: noqa: RUF001  (full-width forms and Japanese punctuation are the point here)
"""line_units: pieces of each kind, keys, Japanese detection, and rebuilding without pieces."""

from __future__ import annotations

import pytest

from curator.stages.dedup.line_units import is_japanese, normalise, pieces, unit_keys
from tests.kernels.reference import dropped_pieces, rebuild


def _texts(text: str, unit: str, japanese: bool = False) -> list[str]:
    return [text[s:e] for s, e in pieces(text, unit, japanese)]  # type: ignore[arg-type]


def test_lines_split_at_every_line_break_and_keep_blank_lines():
    assert _texts("a\nb\r\n\rc\n", "line") == ["a", "b", "", "c", ""]


def test_paragraphs_split_at_blank_lines_only():
    text = "one\ntwo\n \u3000\n\nthree\r\n\r\nfour"
    assert _texts(text, "paragraph") == ["one\ntwo", "three", "four"]


def test_english_sentences_end_before_whitespace_and_at_line_breaks():
    text = "It was 3.14 then. “Really?” she asked!  Yes\nNext line"
    assert _texts(text, "sentence_span") == ["It was 3.14 then.", "“Really?”", "she asked!",
                                             "Yes", "Next line"]


def test_japanese_sentences_need_no_space():
    text = "今日は晴れ。「明日は雨だ！」と言った。本当!?嘘｡end"
    assert _texts(text, "sentence_span", japanese=True) == [
        "今日は晴れ。", "「明日は雨だ！」", "と言った。", "本当!?", "嘘｡", "end"]
    # half-width !? end a sentence without a space only in Japanese
    assert _texts("本当!?嘘", "sentence_span") == ["本当!?嘘"]


@pytest.mark.parametrize(("text", "lang", "expected"), [
    ("今日はいい天気ですね。", None, True), ("Hello 今日", None, False),
    ("Hello world", "ja-JP", True), ("今日はいい天気", "en", False), ("   ", None, False)])
def test_japanese_by_lang_else_by_script(text, lang, expected):
    assert is_japanese(text, lang) is expected


def test_keys_are_nfkc_casefolded_and_whitespace_collapsed():
    assert normalise("  ＡＢＣ\u3000 Straße\tｶｰﾄ ") == "abc strasse カート"
    text = "A b.  C d.\nE f. G h."
    spans = pieces(text, "sentence_span")
    assert unit_keys(text, spans, "sentence_span", 3) == ["a b.\nc d.\ne f.", "c d.\ne f.\ng h."]
    assert unit_keys(text, spans, "sentence_span", 5) == []
    assert unit_keys("x\n\n  \ny", pieces("x\n\n  \ny", "line"), "line", 3) == ["x", "", "", "y"]


def test_rebuild_drops_each_piece_with_the_separator_before_it():
    text = "a\r\nb\nc\n"
    spans = pieces(text, "line")
    assert rebuild(text, spans, {1}) == "a\nc\n"
    assert rebuild(text, spans, {0}) == "b\nc\n"
    assert rebuild(text, spans, {2}) == "a\r\nb\n"
    assert rebuild(text, spans, set()) == text
    assert rebuild(text, spans, {0, 1, 2, 3}) == ""
    text = "  One. Two. Three.\nFour.  "
    spans = pieces(text, "sentence_span")
    assert rebuild(text, spans, dropped_pieces([1], "sentence_span", 2)) == "  One.\nFour.  "
    assert rebuild(text, spans, dropped_pieces([0], "sentence_span", 2)) == "  Three.\nFour.  "
