"""URL normalisation for url_dedup: addresses of one page give one key, of different pages
different keys, and what is no URL gives none."""

from __future__ import annotations

import pytest

from curator.stages.dedup.url_key import UrlRules, normalise_url

SAME = [  # (variant, the form every variant of that page takes)
    ("HTTPS://Example.COM/a/b", "https://example.com/a/b"),
    ("https://example.com:443/a/b", "https://example.com/a/b"),
    ("http://example.com:80/a/b", "https://example.com/a/b"),
    ("https://example.com/a/b#section-2", "https://example.com/a/b"),
    ("http://example.com/a/b", "https://example.com/a/b"),
    ("https://example.com/a/b?utm_source=x&utm_medium=y&fbclid=1&gclid=2&yclid=3",
     "https://example.com/a/b"),
    ("https://example.com/a/b?mc_cid=1&mc_eid=2&_ga=2.1.3&UTM_Campaign=z",
     "https://example.com/a/b"),
    ("https://example.com/a?b=2&a=1&utm_term=q", "https://example.com/a?a=1&b=2"),
    ("https://example.com/a?&b=2&&a=1&", "https://example.com/a?a=1&b=2"),
    ("https://example.com/%7euser/%e3%81%82?q=%2f", "https://example.com/~user/%E3%81%82?q=%2F"),
    ("https://example.com/~user/あ?q=%2F", "https://example.com/~user/%E3%81%82?q=%2F"),
    ("https://example.com/%41%2D%5F", "https://example.com/A-_"),
    ("https://example.com", "https://example.com"),
    ("https://example.com/", "https://example.com"),
    ("https://example.com/?", "https://example.com"),
    ("https://example.com.", "https://example.com"),
    ("https://日本語.jp/記事", "https://xn--wgv71a119e.jp/%E8%A8%98%E4%BA%8B"),
    ("https://XN--WGV71A119E.JP/%e8%a8%98%e4%ba%8b",
     "https://xn--wgv71a119e.jp/%E8%A8%98%E4%BA%8B"),
    ("https://日本語。jp/記事", "https://xn--wgv71a119e.jp/%E8%A8%98%E4%BA%8B"),
    ("  https://example.com/a b  ", "https://example.com/a%20b"),
    ("http://[2001:DB8::1]:80/x", "https://[2001:db8::1]/x"),
    ("https://User:Pw@example.com:443/x", "https://User:Pw@example.com/x"),
    ("ftp://Files.example.com:21/x", "ftp://files.example.com/x"),
]

DIFFERENT = [  # pairs that name different pages
    ("https://example.com/a", "https://example.com/A"),          # paths are case-sensitive
    ("https://example.com/a", "https://example.com/a/"),         # / only on an empty path
    ("https://example.com/a?id=1", "https://example.com/a?id=2"),
    ("https://example.com/a?id=1", "https://example.com/a?id=1&ref=home"),
    ("https://example.com/a?id", "https://example.com/a?id="),
    ("https://example.com/a", "https://example.org/a"),
    ("https://example.com/a", "https://example.com:8443/a"),
    ("http://example.com:443/a", "https://example.com/a"),       # 443 is not http's port
    ("https://example.com/a", "https://www.example.com/a"),      # www. kept by default
    ("https://example.com/a/b", "https://example.com/a%2Fb"),    # %2F is not a separator
    ("https://example.com/a", "ftp://example.com/a"),
]


@pytest.mark.parametrize(("url", "key"), SAME)
def test_variants_of_one_page_take_one_form(url, key):
    assert normalise_url(url) == key


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_different_pages_keep_different_keys(a, b):
    assert normalise_url(a) is not None and normalise_url(b) is not None
    assert normalise_url(a) != normalise_url(b)


@pytest.mark.parametrize("url", [None, "", "   ", "not a url", "/relative/path", "example.com/a",
                                 "mailto:someone@example.com", "http://[::1/",
                                 "http://a.com:99999/", "http://a.com:port/", "https:///path"])
def test_what_is_no_url_has_no_key(url):
    assert normalise_url(url) is None


def test_options():
    keep_scheme = UrlRules(same_scheme=False)
    assert normalise_url("http://example.com/a", keep_scheme) == "http://example.com/a"
    assert normalise_url("https://example.com/a", keep_scheme) == "https://example.com/a"
    fold = UrlRules(fold_www=True)
    assert normalise_url("https://WWW.example.com/a", fold) == "https://example.com/a"
    own = UrlRules(tracking=("ref", "session*"))
    assert normalise_url("https://e.com/a?ref=x&SessionId=1&utm_source=y", own) == \
        "https://e.com/a?utm_source=y"
    assert normalise_url("https://e.com/a?utm_source=y", UrlRules(tracking=())) == \
        "https://e.com/a?utm_source=y"
