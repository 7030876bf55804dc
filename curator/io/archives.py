"""Safe unpacking of source archives (arXiv e-prints) into memory: path -> bytes.

An arXiv e-print is a tar, a gzipped tar, or one gzipped ``.tex``; tars may hold further
archives. Unpacking is into memory (never onto disk), so a hostile member name or link can
never write or read outside the archive: names are checked and refused, links are not
followed. Limits bound the unpacked bytes, the member count, the nesting depth and the
compression ratio (a decompression bomb is stopped while it inflates, not after).

An extracted project folder gets the same rules (:func:`read_folder`): a link that points out
of the folder is refused, one inside it is left out; no link is ever followed.
"""

from __future__ import annotations

import io
import os
import posixpath
import tarfile
import zlib
from dataclasses import dataclass

GZIP_MAGIC = b"\x1f\x8b"
NESTED_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".gz")
CHUNK = 1 << 16


class UnsafeArchive(ValueError):
    """An archive refused, with a one-word ``reason``: unsafe_archive, archive_too_large,
    archive_bomb or bad_archive."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason


@dataclass(frozen=True)
class ArchiveLimits:
    max_total_bytes: int = 256 << 20  # unpacked bytes, all layers together
    max_members: int = 10_000
    max_ratio: float = 200.0  # unpacked / packed bytes of one compressed layer
    ratio_floor: int = 1 << 20  # ratios are checked once a layer has inflated this much
    max_depth: int = 3  # archives inside archives


class _Budget:
    def __init__(self, limits: ArchiveLimits) -> None:
        self.limits, self.bytes, self.members = limits, 0, 0

    def spend(self, n_bytes: int, members: int = 0) -> None:
        self.bytes += n_bytes
        self.members += members
        if self.bytes > self.limits.max_total_bytes:
            raise UnsafeArchive("archive_too_large", f"unpacks to more than "
                                f"{self.limits.max_total_bytes} bytes")
        if self.members > self.limits.max_members:
            raise UnsafeArchive("archive_too_large", f"more than {self.limits.max_members} "
                                "members")


def unpack(data: bytes, name: str, limits: ArchiveLimits | None = None) -> dict[str, bytes]:
    """The files of the archive ``data`` (named ``name``) as ``{relative path: bytes}``.

    A plain file that is no archive comes back as one entry named after ``name``.
    Raises :class:`UnsafeArchive` for anything refused."""
    budget = _Budget(limits or ArchiveLimits())
    return _unpack(data, posixpath.basename(name), budget, depth=0)


def _unpack(data: bytes, name: str, budget: _Budget, depth: int) -> dict[str, bytes]:
    if depth > budget.limits.max_depth:
        raise UnsafeArchive("archive_too_large", f"archives nested deeper than "
                            f"{budget.limits.max_depth}")
    if data[:2] == GZIP_MAGIC:
        data = _gunzip(data, budget)
        name = name.removesuffix(".gz").removesuffix(".tgz")
    elif depth == 0:
        budget.spend(len(data), members=1)
    if _is_tar(data):
        return _untar(data, budget, depth)
    if not name.endswith(".tex"):  # arXiv's gzipped single file: ``<id>.gz`` holds the .tex
        name = name.removesuffix(".tar") + ".tex"
    return {name: data}


def _is_tar(data: bytes) -> bool:
    if len(data) < 512:
        return False
    if data[257:262] == b"ustar":
        return True
    try:  # old (v7) tars have no magic: a valid header checksum decides
        tarfile.TarInfo.frombuf(data[:512], "utf-8", "surrogateescape")
    except tarfile.TarError:
        return False
    return True


def _gunzip(data: bytes, budget: _Budget) -> bytes:
    """Inflate every gzip member of ``data``, stopping as soon as a limit is passed."""
    limits, out, total = budget.limits, [], 0
    block = data
    while block:
        decomp = zlib.decompressobj(wbits=31)
        pending = block
        try:
            while not decomp.eof:
                piece = decomp.decompress(pending, CHUNK)
                pending = decomp.unconsumed_tail
                if not piece and not pending:
                    break  # input exhausted before the end of the member
                total += len(piece)
                out.append(piece)
                budget.spend(len(piece))
                if total > limits.ratio_floor and total > limits.max_ratio * len(data):
                    raise UnsafeArchive("archive_bomb", f"compression ratio over "
                                        f"{limits.max_ratio:g}:1 ({len(data)} bytes inflate "
                                        f"to more than {total})")
        except zlib.error as err:
            raise UnsafeArchive("bad_archive", f"corrupt gzip data: {err}") from None
        if not decomp.eof:
            raise UnsafeArchive("bad_archive", "truncated gzip data")
        block = decomp.unused_data.lstrip(b"\0")
    return b"".join(out)


def _member_path(member: tarfile.TarInfo) -> str:
    """The member's path inside the root; refuses absolute paths and ``..`` escapes."""
    name = member.name
    normal = posixpath.normpath(name.replace("\\", "/"))
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchive("unsafe_archive", f"member {name} has an absolute path")
    if normal == ".." or normal.startswith("../"):
        raise UnsafeArchive("unsafe_archive", f"member {name} escapes the root")
    return normal


def _check_link(member: tarfile.TarInfo, path: str) -> None:
    target = member.linkname
    if target.startswith("/"):
        raise UnsafeArchive("unsafe_archive", f"link {member.name} -> {target} points outside "
                            "the root")
    base = posixpath.dirname(path) if member.issym() else ""
    resolved = posixpath.normpath(posixpath.join(base, target))
    if resolved == ".." or resolved.startswith("../"):
        raise UnsafeArchive("unsafe_archive", f"link {member.name} -> {target} escapes the "
                            "root")


def _untar(data: bytes, budget: _Budget, depth: int) -> dict[str, bytes]:
    """Every regular file of a tar; a member that is itself an archive is unpacked in place
    (its packed bytes and its unpacked bytes both count against the budget)."""
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar:
                budget.spend(0, members=1)
                path = _member_path(member)
                if member.issym() or member.islnk():
                    _check_link(member, path)  # links inside the root: not followed, left out
                    continue
                if not member.isfile():
                    continue
                budget.spend(member.size)  # declared size: refused before it is read
                handle = tar.extractfile(member)
                content = handle.read() if handle is not None else b""
                if path.endswith(NESTED_SUFFIXES):
                    inner = _unpack(content, posixpath.basename(path), budget, depth + 1)
                    folder = posixpath.dirname(path)
                    files.update({posixpath.join(folder, k): v for k, v in inner.items()})
                else:
                    files[path] = content
    except tarfile.TarError as err:
        raise UnsafeArchive("bad_archive", f"corrupt tar: {err}") from None
    return files


def read_folder(root: str, suffixes: tuple[str, ...],
                limits: ArchiveLimits | None = None) -> dict[str, bytes]:
    """The files of the local folder ``root`` whose names end with ``suffixes``, as
    ``{relative path: bytes}``, under the archives' rules: a symbolic link (to a file or a
    folder) that points out of ``root`` is refused, one inside it is left out, none is followed;
    the member and byte limits hold. Raises :class:`UnsafeArchive`."""
    budget = _Budget(limits or ArchiveLimits())
    real_root = os.path.realpath(root)
    files: dict[str, bytes] = {}
    for folder, dirs, names in os.walk(root):  # (os.walk does not descend into linked folders)
        dirs.sort()
        for name in sorted(dirs + names):
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            if os.path.islink(path):
                target = os.path.realpath(path)
                if os.path.commonpath([real_root, target]) != real_root:
                    raise UnsafeArchive("unsafe_archive", f"link {relative} -> "
                                        f"{os.readlink(path)} points outside the folder")
                continue
            if name not in names or not name.lower().endswith(suffixes):
                continue
            budget.spend(0, members=1)
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as handle:
                budget.spend(os.fstat(handle.fileno()).st_size)
                files[relative] = handle.read(budget.limits.max_total_bytes + 1)
    return files
