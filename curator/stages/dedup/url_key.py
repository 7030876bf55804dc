"""The key ``url_dedup`` compares documents by: a URL normalised so that addresses of one page
compare equal (``urllib.parse``, no state).

It follows RFC 3986's syntax- and scheme-based normalisation (sections 6.2.2 and 6.2.3) and the
WHATWG URL Standard's host and port rules: scheme and host in lower case, the host IDNA-encoded
(punycode: a Japanese domain in Unicode and in ``xn--`` form compare equal), a default port
dropped (http 80, https 443, ws 80, wss 443, ftp 21), percent-encoding normalised (an unreserved
character's escape decoded, other escapes in upper-case hex, characters outside printable ASCII
encoded as UTF-8), an empty path and ``/`` the same. Paths stay case-sensitive.

It deliberately differs where two URLs almost always name one page for a crawl, though not for
a browser: the fragment is dropped; tracking parameters (``tracking``, globs, case-insensitive)
are removed and the rest sorted (``b=2&a=1`` is ``a=1&b=2``: a server could tell them apart, a
crawl's copies rarely differ so); ``http`` and ``https`` are one scheme (``same_scheme``); a
leading ``www.`` is dropped with ``fold_www`` (off: it may be another site); a trailing dot of
the host is dropped (as ``url_filter`` compares hosts). Not done: RFC 3986's dot-segment removal
(``/a/../b``: crawlers record resolved URLs); ``+`` and ``%20`` in a query stay distinct.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from functools import cache
from urllib.parse import unquote, urlsplit

from curator.stages.filters.url import normalise_host

#: Query parameters that say where a visitor came from, not which page it is.
DEFAULT_TRACKING: tuple[str, ...] = (
    "utm_*", "fbclid", "gclid", "dclid", "gbraid", "wbraid", "msclkid", "yclid", "twclid",
    "ttclid", "igshid", "mc_cid", "mc_eid", "_ga", "_gl", "_hsenc", "_hsmi", "mkt_tok", "vero_id")

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})|[^\x21-\x7e]")


@dataclass(frozen=True)
class UrlRules:
    """The options of :func:`normalise_url`."""

    same_scheme: bool = True
    fold_www: bool = False
    tracking: tuple[str, ...] = DEFAULT_TRACKING


DEFAULT_RULES = UrlRules()


def normalise_url(url: str | None, rules: UrlRules = DEFAULT_RULES) -> str | None:
    """``url`` normalised (module docstring); None for no URL: empty, without a scheme or a
    host, or not parseable (a bad port, an unclosed ``[``)."""
    if not url:
        return None
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), parts.hostname
    if not scheme or not host:
        return None
    host = normalise_host(host)
    if rules.fold_www:
        host = host.removeprefix("www.")
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        netloc += f":{port}"
    user, at, _ = parts.netloc.rpartition("@")
    if at:
        netloc = f"{_percent(user)}@{netloc}"
    if rules.same_scheme and scheme == "http":
        scheme = "https"
    path = _percent(parts.path)
    query = _query(parts.query, rules.tracking)
    return f"{scheme}://{netloc}{'' if path == '/' else path}" + (f"?{query}" if query else "")


def _percent(component: str) -> str:
    """Escapes of unreserved characters decoded, the others' hex in upper case, characters
    outside printable ASCII escaped (UTF-8)."""

    def fix(match: re.Match[str]) -> str:
        if match.group(1):
            char = chr(int(match.group(1), 16))
            return char if char in _UNRESERVED else match.group(0).upper()
        return "".join(f"%{b:02X}" for b in match.group(0).encode("utf-8"))

    return _ESCAPE.sub(fix, component)


def _query(query: str, tracking: tuple[str, ...]) -> str:
    """The parameters but tracking ones (matched on the decoded, lower-cased name), each
    percent-normalised, sorted; empty ones dropped."""
    drop = _pattern(tracking)
    kept = []
    for item in query.split("&"):
        name, eq, value = item.partition("=")
        if item and not drop.fullmatch(unquote(name).lower()):
            kept.append((_percent(name), eq, _percent(value)))
    return "&".join(name + eq + value for name, eq, value in sorted(kept))


@cache
def _pattern(globs: tuple[str, ...]) -> re.Pattern[str]:
    """One regular expression matching any of ``globs`` (lower case), or nothing."""
    return re.compile("|".join(fnmatch.translate(g.lower()) for g in globs) or r"(?!)")
