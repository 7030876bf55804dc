"""Charset decoding of HTML: header, then meta, then detection; Japanese legacy encodings."""

from __future__ import annotations

import codecs
import gzip

import pytest

from curator.batch import Shard
from curator.io.charset import browser_codec, decode_html
from curator.io.warc import read_warc_batches
from tests.warc_builder import CORPUS, write_warc

FEEDS = CORPUS / "japanese" / "html" / "chardet_feeds"
needs_feeds = pytest.mark.skipif(not FEEDS.exists(), reason="shared corpus not staged")
JA_PLAIN = "日本語のページです。吾輩は猫である。名前はまだ無い。"
# ① and 髙 exist only in CP932, and U+FF5E is where CP932 (not Shift_JIS) puts 0x8160
JA = JA_PLAIN + "①②③ \uff5e 髙橋"


def _html(head: str, body: str) -> str:
    return f"<html><head>{head}<title>題名</title></head><body><p>{body}</p></body></html>"


def _feeds() -> list[tuple[str, bytes]]:
    return [(path.parent.name, gzip.decompress(path.read_bytes()))
            for path in sorted(FEEDS.glob("*/*.gz"))]


@pytest.mark.parametrize("label", ["shift_jis", "Shift_JIS", "x-sjis", "cp932", "windows-31j"])
def test_shift_jis_labels_decode_as_browsers_do(label):
    # browsers decode every Shift_JIS label as CP932
    payload = _html("", JA).encode("cp932")
    decoded = decode_html(payload, label)
    assert decoded.text == _html("", JA) and decoded.replaced_bytes == 0
    assert decoded.source == "http" and decoded.encoding == "cp932"


@pytest.mark.parametrize("codec,label", [("euc_jp", "EUC-JP"), ("iso2022_jp", "ISO-2022-JP"),
                                         ("cp932", "Shift_JIS")])
@pytest.mark.parametrize("tag", ['<meta charset="{}">',
                                 '<meta http-equiv="Content-Type" content="text/html; '
                                 'charset={}">'])
def test_the_meta_tag_is_used_without_a_header(codec, label, tag):
    text = _html(tag.format(label), JA_PLAIN)
    decoded = decode_html(text.encode(codec))
    assert decoded.text == text and decoded.source == "meta"


def test_the_header_wins_over_the_meta_tag():
    text = _html('<meta charset="iso-8859-1">', JA)
    decoded = decode_html(text.encode("utf-8"), "utf-8")
    assert decoded.text == text and decoded.source == "http"


def test_an_unknown_label_falls_back_to_detection():
    text = _html('<meta charset="klingon-8">', JA_PLAIN * 20)
    decoded = decode_html(text.encode("euc_jp"), "no-such-charset")
    assert decoded.unknown_label and decoded.source == "detected"
    assert decoded.text == text


def test_undecodable_bytes_are_replaced_and_counted():
    payload = "élan ".encode() + b"\x80\xff" + b" fin" + b"\xc3"
    decoded = decode_html(payload, "utf-8")
    assert decoded.replaced_bytes == 3 and decoded.text == "élan \ufffd\ufffd fin\ufffd"


def test_a_byte_order_mark_wins():
    decoded = decode_html(b"\xef\xbb\xbf" + _html("", JA).encode(), "iso-8859-1")
    assert decoded.text == _html("", JA) and decoded.source == "bom"


def test_browser_codec_names():
    assert browser_codec("EUC-JP") == "euc_jp" and browser_codec("latin1") == "cp1252"
    assert browser_codec("bogus-label") is None and browser_codec(None) is None


@needs_feeds
def test_legacy_japanese_feeds_decode_to_their_labelled_encoding():
    feeds = _feeds()
    right = [decode_html(payload).text == payload.decode(browser_codec(label), "replace")
             for label, payload in feeds]
    assert len(feeds) == 63
    assert sum(right) / len(right) >= 0.95, f"{sum(right)} of {len(right)}"


@needs_feeds
def test_legacy_japanese_pages_in_a_warc_without_a_charset_label(tmp_path):
    feeds = _feeds()  # feeds declare their encoding in <?xml ...?>; pages may name none
    write_warc(tmp_path / "ja.warc.gz",
               [(f"http://ja/{i}", payload, "text/html") for i, (_, payload) in enumerate(feeds)])
    rows = [row for batch in read_warc_batches(Shard(0, str(tmp_path / "ja.warc.gz"),
                                                     label="ja"), 1 << 20, "read_warc")
            for row in batch.table.to_pylist()]
    expected = [payload.decode(browser_codec(label), "replace") for label, payload in feeds]
    right = sum(row["text"] == want for row, want in zip(rows, expected, strict=True))
    assert right / len(feeds) >= 0.95, f"{right} of {len(feeds)}"


# Issue 27, defect 1: a label is evidence, never an instruction. Labels that name a bytes
# transform (rot13, base64, zlib), a text codec that is no charset (undefined, escapes, IDNA,
# UTF-7), or hold NUL / non-ASCII / too many characters fall back to detection.
NOT_CHARSETS = ["rot13", "base64", "zlib", "hex", "bz2", "quopri", "uu", "undefined",
                "unicode_escape", "raw_unicode_escape", "idna", "punycode", "utf-7", "charmap",
                "utf-8\x00", "uni\x00code", "x" * 500, "\u00fctf-8", "\ud800"]
ASCII_PAGE = _html("", "plain words: +2D8- \\ud800 x\\x00 end") * 3


@pytest.mark.parametrize("label", NOT_CHARSETS)
def test_a_header_label_that_is_no_charset_falls_back_to_detection(label):
    decoded = decode_html(ASCII_PAGE.encode(), label)
    assert decoded.unknown_label and decoded.source == "detected"
    assert decoded.text == ASCII_PAGE and browser_codec(label) is None


@pytest.mark.parametrize("label", [x for x in NOT_CHARSETS if (x.isascii() and x.isalnum())
                                   or x in ("utf-7", "unicode_escape")])
def test_a_meta_label_that_is_no_charset_falls_back_to_detection(label):
    page = _html(f'<meta charset="{label}">', "plain words: +2D8- \\ud800 end")
    decoded = decode_html(page.encode())
    assert decoded.unknown_label and decoded.source == "detected" and decoded.text == page


@pytest.mark.parametrize("label", ["utf-16", "utf-32", "utf-16-be"])
def test_a_codec_that_fails_on_the_page_hands_it_on(label):
    payload = ASCII_PAGE.encode() + b"x"  # odd length: no UTF-16 or UTF-32 page
    decoded = decode_html(payload, label)
    assert decoded.unknown_label and decoded.source == "detected"
    assert decoded.text == ASCII_PAGE + "x"


def test_a_utf16_bom_on_a_broken_page_hands_it_on():
    decoded = decode_html(codecs.BOM_UTF16_LE + b"<p>odd</p>!", None)  # odd: no UTF-16
    assert decoded.source == "detected" and "odd" in decoded.text


def test_hostile_charset_labels_in_a_warc_are_kept_and_counted(tmp_path):
    pages = [(f"http://h/{i}", _html("", f"page {i}").encode(), f"text/html; charset={label}")
             for i, label in enumerate(["rot13", "base64", "zlib", "undefined", "utf-7",
                                        "unicode_escape", "utf-8\x00"])]
    pages.append(("http://m/", _html('<meta charset="base64">', "meta").encode(), "text/html"))
    write_warc(tmp_path / "labels.warc.gz", pages)
    batches = list(read_warc_batches(Shard(0, str(tmp_path / "labels.warc.gz"), label="l"),
                                     1 << 20, "read_warc"))
    rows = [row for b in batches for row in b.table.to_pylist()]
    assert [r["url"] for r in rows] == [url for url, _, _ in pages]
    assert not [f for b in batches for f in b.failed]
    assert sum(b.notes["charset_unknown"] for b in batches) == len(pages)
