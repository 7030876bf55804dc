"""Remove documents whose URL's host is on a block list (subdomains included) or whose URL holds
a blocked substring."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, field_validator

from curator.stages.base import Filter

# scheme://, user@, then the host (bracketed IPv6 or up to a port, path, query or fragment)
_HOST = r"^\s*(?:[A-Za-z][A-Za-z0-9+.\-]*:)?(?://)?(?:[^@/?#\s]*@)?(?P<host>\[[^\]]*\]|[^:/?#\s]*)"


def normalise_host(host: str) -> str:
    """Lower case, no trailing dot, internationalised names as punycode (``xn--``)."""
    host = host.strip().strip(".").lower()
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


def read_domains(path: Path) -> list[str]:
    """One domain per line; ``#`` starts a comment; blank lines skipped; ``*.``/``.`` prefixes
    dropped (a domain always blocks its subdomains)."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            entry = line.split("#", 1)[0].strip()
            if entry:
                out.append(normalise_host(entry.removeprefix("*.").lstrip(".")))
    return out


def block_lists(paths: list[str], categories: list[str] | None) -> dict[str, Path]:
    """List name -> domains file: a file (named by its stem), a UT1 category folder (its
    ``domains`` file, named by the folder) or a UT1 root (one list per category folder)."""
    lists: dict[str, Path] = {}
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_file():
            lists[path.name.split(".")[0]] = path
        elif (path / "domains").is_file():
            lists[path.name] = path / "domains"
        elif path.is_dir():
            found = {p.parent.name: p for p in sorted(path.glob("*/domains")) if p.is_file()}
            if not found:
                raise ValueError(f"{raw}: a folder without a 'domains' file or category folders "
                                 "holding one (UT1 layout)")
            lists.update(found)
        else:
            raise ValueError(f"{raw}: no such block list file or folder")
    if categories is not None:
        missing = sorted(set(categories) - set(lists))
        if missing:
            raise ValueError(f"categories {missing} not found among the lists {sorted(lists)}")
        lists = {k: v for k, v in lists.items() if k in categories}
    return lists


class UrlFilter(Filter):
    """Remove documents whose URL's host, or a parent domain of it, is on a block list
    (``a.b.example.com`` is blocked by ``example.com``; ``myexample.com`` and
    ``example.com.evil.org`` are not); reason ``url_blocked:<list>`` (the most specific match).
    Hosts are compared in lower case without port, user or trailing dot, internationalised names
    as punycode. Then ``substrings`` (case-insensitive, anywhere in the URL): ``url_substring``.
    Documents without a URL are kept."""

    type = "url_filter"

    lists: list[str] = Field(default_factory=list, description="Block lists: files (one domain "
                             "per line, '#' comments; named by the file name), UT1 category "
                             "folders (their 'domains' file) or a UT1 root (every category).")
    categories: list[str] | None = Field(None, description="Only these list names (UT1 "
                                         "categories, e.g. [adult, gambling]); default all.")
    substrings: list[str] = Field(default_factory=list, description="A URL containing one "
                                  "(case-insensitive) is removed as 'url_substring'.")
    url_field: str = Field("url", description="Column holding the URL.")

    _domains: Any = None
    _names: Any = None

    def side_inputs(self) -> list[str]:
        return list(self.lists)

    @field_validator("lists")
    @classmethod
    def _check_lists(cls, value: list[str]) -> list[str]:
        block_lists(value, None)
        return value

    def setup(self) -> None:
        domains: dict[str, str] = {}
        for name, path in block_lists(self.lists, self.categories).items():
            for domain in read_domains(path):
                domains.setdefault(domain, name)
        self._domains = pa.array(list(domains), pa.string())
        self._names = pa.array([f"url_blocked:{n}" for n in domains.values()], pa.string())

    def hosts(self, urls: pa.Array) -> pa.Array:
        """The normalised host of every URL (null where there is none)."""
        host = pc.struct_field(pc.extract_regex(urls, _HOST), "host")
        host = pc.utf8_rtrim(pc.utf8_lower(host), characters=".")
        ascii_ = pc.fill_null(pc.string_is_ascii(host), True)
        if not pc.all(ascii_).as_py():
            values = host.to_pylist()
            for i in pc.indices_nonzero(pc.invert(ascii_)).to_pylist():
                values[i] = normalise_host(values[i])
            host = pa.array(values, pa.string())
        return pc.if_else(pc.equal(pc.utf8_length(host), 0), pa.scalar(None, pa.string()), host)

    def reasons(self, batch: pa.Table) -> pa.Array:
        if self.url_field not in batch.column_names:
            return pa.nulls(batch.num_rows, pa.string())
        if self._domains is None:
            self.setup()
        urls = batch.column(self.url_field).combine_chunks().cast(pa.string())
        reasons = pa.nulls(batch.num_rows, pa.string())
        if len(self._domains):
            current = self.hosts(urls)
            while pc.any(pc.is_valid(current)).as_py():  # the host, then each parent domain
                hit = pc.take(self._names, pc.index_in(current, value_set=self._domains))
                reasons = pc.coalesce(reasons, hit)
                parent = pc.extract_regex(current, r"^[^.]*\.(?P<rest>.+)$")
                current = pc.struct_field(parent, "rest")
                current = pc.if_else(pc.is_valid(parent), current, pa.scalar(None, pa.string()))
        if self.substrings:
            lower = pc.utf8_lower(urls)
            found = pa.array([False] * batch.num_rows)
            for s in self.substrings:
                found = pc.or_(found, pc.fill_null(pc.match_substring(lower, s.lower()), False))
            reasons = pc.coalesce(reasons, pc.if_else(found, pa.scalar("url_substring"),
                                                      pa.scalar(None, pa.string())))
        return reasons
