"""Safe unpacking of arXiv source archives: tar, tar.gz, a gzipped single .tex, nested
archives; traversal, absolute paths and outward links refused; size, member, depth and ratio
limits (a real decompression bomb is stopped); extracted folders under the same rules."""

from __future__ import annotations

import gzip
import io
import tarfile
import time
from pathlib import Path

import pytest

from curator.io.archives import ArchiveLimits, UnsafeArchive, read_folder, unpack

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "arxiv_latex"


def make_tar(members: dict[str, bytes], gz: bool = True,
             links: dict[str, tuple[str, bytes]] | None = None) -> bytes:
    """A tar (gzipped by default) of ``members``; ``links``: name -> (target, SYMTYPE/LNKTYPE)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if gz else "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, (target, kind) in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, target
            tar.addfile(info)
    return buffer.getvalue()


def test_tar_gz_with_folders():
    data = make_tar({"main.tex": b"\\documentclass{article}", "sec/intro.tex": b"Intro"})
    assert unpack(data, "2101.00001.tar.gz") == {"main.tex": b"\\documentclass{article}",
                                                 "sec/intro.tex": b"Intro"}


def test_plain_tar_and_gzipped_single_file():
    assert unpack(make_tar({"a.tex": b"A"}, gz=False), "x.tar") == {"a.tex": b"A"}
    single = gzip.compress(b"\\documentclass{article}\\begin{document}x\\end{document}")
    assert unpack(single, "hep-th9901001.gz") == {
        "hep-th9901001.tex": b"\\documentclass{article}\\begin{document}x\\end{document}"}


def test_nested_archives_unpack_in_place():
    inner = make_tar({"b.tex": b"B"})
    single = gzip.compress(b"C")
    outer = make_tar({"main.tex": b"M", "parts/inner.tar.gz": inner, "parts/c.tex.gz": single})
    assert unpack(outer, "p.tar.gz") == {"main.tex": b"M", "parts/b.tex": b"B",
                                         "parts/c.tex": b"C"}


def test_nesting_deeper_than_the_limit_is_refused():
    data = make_tar({"a.tex": b"A"})
    for level in range(4):
        data = make_tar({f"level{level}.tar.gz": data})
    with pytest.raises(UnsafeArchive, match="archive_too_large: archives nested deeper than 3"):
        unpack(data, "deep.tar.gz")


@pytest.mark.parametrize("name", ["../x.tex", "a/../../x.tex", "../../etc/passwd"])
def test_traversal_is_refused(name):
    with pytest.raises(UnsafeArchive) as refused:
        unpack(make_tar({"main.tex": b"M", name: b"evil"}), "evil.tar.gz")
    assert refused.value.reason == "unsafe_archive"
    assert str(refused.value) == f"unsafe_archive: member {name} escapes the root"


def test_absolute_path_is_refused():
    with pytest.raises(UnsafeArchive, match=r"unsafe_archive: member /tmp/x\.tex has an absolute"):
        unpack(make_tar({"/tmp/x.tex": b"evil"}), "abs.tar.gz")


def test_links_out_of_the_root_are_refused_and_inside_ones_left_out():
    outward = {"up.tex": ("../../secret", tarfile.SYMTYPE)}
    with pytest.raises(UnsafeArchive, match=r"unsafe_archive: link up.tex -> ../../secret "
                                            "escapes the root"):
        unpack(make_tar({"main.tex": b"M"}, links=outward), "l.tar.gz")
    absolute = {"abs.tex": ("/etc/passwd", tarfile.SYMTYPE)}
    with pytest.raises(UnsafeArchive, match="points outside the root"):
        unpack(make_tar({"main.tex": b"M"}, links=absolute), "l.tar.gz")
    hard = {"h.tex": ("../main.tex", tarfile.LNKTYPE)}
    with pytest.raises(UnsafeArchive, match="escapes the root"):
        unpack(make_tar({"main.tex": b"M"}, links=hard), "l.tar.gz")
    inside = {"sec/alias.tex": ("../main.tex", tarfile.SYMTYPE)}
    assert unpack(make_tar({"main.tex": b"M"}, links=inside), "l.tar.gz") == {"main.tex": b"M"}


def test_decompression_bomb_is_stopped_while_it_inflates():
    bomb = make_tar({"main.tex": b"\\documentclass{article}", "zeros.tex": bytes(200 << 20)})
    assert len(bomb) < 400_000  # 200 MB of zeros pack to a few hundred KB
    started = time.perf_counter()
    with pytest.raises(UnsafeArchive) as refused:
        unpack(bomb, "bomb.tar.gz")
    assert refused.value.reason == "archive_bomb"
    assert str(refused.value).startswith("archive_bomb: compression ratio over 200:1")
    assert time.perf_counter() - started < 5


def test_size_and_member_limits():
    many = make_tar({f"f{i}.tex": b"x" for i in range(50)})
    with pytest.raises(UnsafeArchive, match="archive_too_large: more than 20 members"):
        unpack(many, "m.tar.gz", ArchiveLimits(max_members=20))
    big = make_tar({"a.tex": bytes(range(256)) * 4096}, gz=False)  # 1 MiB, incompressible-ish
    with pytest.raises(UnsafeArchive, match="archive_too_large: unpacks to more than 100000"):
        unpack(big, "b.tar", ArchiveLimits(max_total_bytes=100_000))


def test_corrupt_and_truncated_gzip():
    data = make_tar({"a.tex": b"hello " * 1000})
    with pytest.raises(UnsafeArchive, match="bad_archive: truncated gzip data"):
        unpack(data[: len(data) // 2], "t.tar.gz")
    with pytest.raises(UnsafeArchive, match="bad_archive: corrupt gzip data"):
        unpack(data[:20] + b"\xff" * 50 + data[70:], "c.tar.gz")


@pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not staged")
def test_real_arxiv_tarballs():
    files = unpack((CORPUS / "2004.14974.source-textonly.tar.gz").read_bytes(), "2004.14974")
    assert "emnlp2020.tex" in files and "tables/main-results.tex" in files
    assert any(p.rsplit("/", 1)[-1].startswith("._") for p in files)  # the AppleDouble junk
    assert all(not p.startswith(("/", "..")) for p in files)


# ---- issue 27, defect 6: an extracted project folder gets the archives' rules
def test_a_folder_refuses_links_out_and_leaves_links_inside_out(tmp_path):
    secret = tmp_path / "secret.tex"
    secret.write_text("SECRET")
    project = tmp_path / "project"
    (project / "sec").mkdir(parents=True)
    (project / "main.tex").write_text("M")
    (project / "sec" / "alias.tex").symlink_to(project / "main.tex")  # inside: left out
    (project / "sec" / "up").symlink_to(project)  # a folder inside: never walked into
    assert read_folder(str(project), (".tex",)) == {"main.tex": b"M"}
    for name, target in [("x.tex", secret), ("fig.pdf", secret), ("outside", tmp_path),
                         ("rel.tex", Path("../../secret.tex"))]:
        link = project / "sec" / name
        link.symlink_to(target)
        with pytest.raises(UnsafeArchive, match=f"unsafe_archive: link sec/{name} -> .* points "
                                                "outside the folder"):
            read_folder(str(project), (".tex",))
        link.unlink()


def test_a_folder_keeps_the_member_and_size_limits(tmp_path):
    for i in range(30):
        (tmp_path / f"f{i}.tex").write_text("x" * 100)
    with pytest.raises(UnsafeArchive, match="more than 20 members"):
        read_folder(str(tmp_path), (".tex",), ArchiveLimits(max_members=20))
    with pytest.raises(UnsafeArchive, match="unpacks to more than 1000"):
        read_folder(str(tmp_path), (".tex",), ArchiveLimits(max_total_bytes=1000))
