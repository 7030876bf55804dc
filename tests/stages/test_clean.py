"""clean: real documents (English speeches, Japanese literature) with planted mojibake, control
characters and boilerplate lines come back repaired; every kind of change is counted in the
stage's notes (stats.json) through a real run."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

pytest.importorskip("ftfy")

from curator import Clean, Pipeline, ReadJsonl, WriteParquet
from curator.batch import BatchResult, join_results
from tests.conftest import assert_accounting, sample_documents

BOILERPLATE = ["This site uses cookies to improve your experience.",
               "Please enable JavaScript to view the comments.",
               "Read our Privacy Policy and Terms of Use.",
               "Lorem ipsum dolor sit amet, consectetur adipiscing elit.",
               "当サイトはクッキーを使用しています。", "利用規約に同意する"]


def _mojibake(text: str) -> str:
    """UTF-8 bytes read as Windows-1252 the way browsers do (its five unassigned bytes as C1
    controls): the usual mojibake."""
    out = []
    for byte in text.encode("utf-8"):
        try:
            out.append(bytes([byte]).decode("cp1252"))
        except UnicodeDecodeError:
            out.append(chr(byte))
    return "".join(out)


@pytest.fixture(scope="module")
def docs() -> tuple[list[str], list[str]]:
    """Real paragraphs (short, one en and one ja document each), and the same with defects."""
    real = sample_documents()
    en = [d["text"] for d in real if d["text"].count(" ") > 50][:6]
    ja = [d["text"] for d in real if d["text"].count(" ") <= 50][:6]
    originals, planted = [], []
    for i, text in enumerate(en + ja):
        paras = [p.strip() for p in text.replace("\r", "").split("\n") if p.strip()][:6]
        originals.append("\n".join(paras))
        bad = list(paras)
        bad.insert(1, BOILERPLATE[i % len(BOILERPLATE)])
        bad[0] = bad[0][:10] + "\x00\x07\u200b" + bad[0][10:] + "   \t"
        if i % 2 == 0 and i < 6:  # English: a mojibake paragraph with accents and quotes
            bad[2] = _mojibake("Café “crème” — naïve résumé: " + bad[2])
            paras[1] = "Café “crème” — naïve résumé: " + paras[1]
            originals[-1] = "\n".join(paras)
        planted.append("\r\n".join(bad) + "\n\n\n\n")
    return originals, planted


def test_planted_defects_are_repaired(docs):
    originals, planted = docs
    table = pa.table({"id": [str(i) for i in range(len(planted))], "text": planted})
    result = Clean().process(table)
    assert result.kept.column("text").to_pylist() == originals
    notes = result.notes
    assert notes["docs_unicode_fixed"] == 3
    assert notes["control_chars_removed"] == 3 * len(planted)
    assert notes["boilerplate_lines_removed"] == len(planted)
    assert notes["docs_whitespace_normalised"] == len(planted)


def test_clean_text_is_left_alone(docs):
    originals, _ = docs
    table = pa.table({"id": [str(i) for i in range(len(originals))], "text": originals})
    result = Clean().process(table)
    assert result.kept.column("text").to_pylist() == originals
    assert result.notes == {}


def test_nfkc_and_empty_documents():
    wide = "\uff21\uff22\uff23\uff11\uff12\uff13 \uff76\uff80\uff76\uff85\u3000です"
    table = pa.table({"id": ["a", "b", "c", "d"],
                      "text": [wide, "", "\x00 \n\n\t", None]})
    result = Clean(nfkc=True).process(table)
    assert result.kept.column("text").to_pylist() == ["ABC123 カタカナ です"]
    assert result.notes["docs_nfkc_changed"] == 1
    assert result.removed.column("reason").to_pylist() == ["empty_after_clean"] * 3
    assert Clean().process(table.slice(0, 1)).kept.column("text").to_pylist() == \
        [wide]  # NFC: widths untouched


def test_boilerplate_is_configurable_and_precise():
    text = ("We baked cookies for the fair.\nJava and Script are islands.\n"
            "The privacy of policy makers.\nUse cookies to track sessions.")
    table = pa.table({"id": ["a"], "text": [text]})
    kept = Clean().process(table).kept.column("text").to_pylist()[0]
    assert kept == text.rsplit("\n", 1)[0]
    assert Clean(boilerplate=[]).process(table).kept.column("text").to_pylist() == [text]
    assert Clean(boilerplate=["islands"]).process(table).notes["boilerplate_lines_removed"] == 1
    with pytest.raises(ValueError, match="boilerplate pattern"):
        Clean(boilerplate=["(unclosed"])


@pytest.mark.parametrize("timeout_s", [None, 60.0])  # 60: through the sandbox process
def test_notes_join_and_reach_stats(tmp_path, docs, timeout_s):
    a = BatchResult(kept=pa.table({"x": [1]}), notes={"k": 2})
    b = BatchResult(kept=pa.table({"x": [2]}), notes={"k": 3, "j": 1})
    assert join_results([a, b], pa.table({"x": pa.array([], pa.int64())})).notes == \
        {"k": 5, "j": 1}
    _, planted = docs
    src = tmp_path / "in"
    src.mkdir()
    with open(src / "part-0.jsonl", "w", encoding="utf-8") as f:
        for i, text in enumerate(planted):
            f.write(json.dumps({"id": str(i), "text": text}, ensure_ascii=False) + "\n")
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=f"{src}/*.jsonl"), Clean(timeout_s=timeout_s), WriteParquet()],
             output=str(run)).run(executor="local", progress=False)
    stats = assert_accounting(run)
    entry = next(s for s in stats["stages"] if s["type"] == "clean")
    assert entry["notes"]["boilerplate_lines_removed"] == len(planted)
    assert entry["notes"]["docs_unicode_fixed"] == 3


def test_japanese_mojibake_is_repaired():
    ja = next(d["text"] for d in sample_documents() if d["text"].count(" ") <= 50)
    line = next(p.strip() for p in ja.splitlines() if "の" in p and len(p.strip()) > 20)[:80]
    table = pa.table({"id": ["a"], "text": [_mojibake(line)]})
    result = Clean().process(table)
    assert result.kept.column("text").to_pylist() == [line]
    assert result.notes["docs_unicode_fixed"] == 1
