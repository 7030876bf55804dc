"""Shared fixtures for the kernel tests."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pyarrow as pa
import pytest

DATA = Path(__file__).parent / "data" / "sample_docs.jsonl.gz"


@pytest.fixture(scope="session")
def sample_docs() -> list[dict]:
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def random_text(rng: random.Random, length: int) -> str:
    """Mixed-script text: ASCII words, kana/kanji, Greek/Cyrillic capitals, emoji, spaces."""
    pools = [
        "the quick brown fox jumps over lazy dog",
        "ひらがなカタカナ漢字日本語のテキスト。、「」",
        "\u0391\u0392\u0393\u0394\u03aa\u03ab\u03b1 \u0410\u0411\u0401\u0402\u042f\u0430"
        " \u00c0\u00c9\u00de\u00d7\u00df",
        "\U0001f600\U0001f389\U0001f44d\U0001f3fd\U0001d518\U0001d52b",
        " \t\n\u3000\u00a0.,;!?-()'\"",
    ]
    out = []
    while len(out) < length:
        pool = rng.choice(pools)
        out.extend(rng.choice(pool) for _ in range(rng.randint(1, 8)))
    return "".join(out[:length])


def edge_case_array() -> pa.Array:
    """Empty, short, whitespace-only, null, multi-byte and long documents."""
    rng = random.Random(7)
    docs = [
        "",
        "a",
        "ab cd",
        "   ",
        None,
        "日本語",
        "犬が走る。猫も走る。",
        "😀" * 30,
        " ,. Hello, World! ",
        "ÉCOLE École école",
        "x" * 23,
        "y" * 24,
        "z" * 25,
    ]
    docs += [random_text(rng, rng.choice([5, 40, 300, 3000, 9000])) for _ in range(40)]
    return pa.array(docs, pa.string())


def malformed_array() -> pa.Array:
    """A string array whose bytes are not valid UTF-8 (built from buffers, unchecked)."""
    blobs = [
        b"\x80\x80abc",
        b"ab\xc3",
        b"\xff\xfe\xfd text here \xe3\x81",
        b"\xf0\x9f\x98",
        b"ok \xc3\xa9t\xc3\xa9 \xed\xa0\x80 ok",
        bytes(range(256)) * 3,
    ]
    offsets = [0]
    for b in blobs:
        offsets.append(offsets[-1] + len(b))
    return pa.StringArray.from_buffers(
        len(blobs),
        pa.py_buffer(pa.array(offsets, pa.int32()).buffers()[1]),
        pa.py_buffer(b"".join(blobs)),
    )
