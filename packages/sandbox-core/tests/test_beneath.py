"""Driver-side file operations stay beneath the sandbox root (openat2 and the O_NOFOLLOW walk)."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from patchgym_sandbox import (
    FileTooLarge,
    NotARegularFile,
    PathOutsideSandbox,
    SandboxFileError,
    SandboxFileNotFound,
    beneath,
)


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(beneath, "_openat2_works", None if request.param == "openat2" else False)
    return str(request.param)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    (r / "d").mkdir(parents=True)
    (r / "d" / "f.txt").write_text("inside\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    os.symlink(tmp_path / "secret.txt", r / "abs-link")
    os.symlink("../secret.txt", r / "up-link")
    os.symlink(str(tmp_path), r / "dir-link")
    os.symlink("/proc/self/environ", r / "env-link")
    return r


@pytest.mark.parametrize("name", ["abs-link", "up-link", "dir-link/secret.txt", "env-link"])
def test_reads_never_leave_the_root(root: Path, resolver: str, name: str) -> None:
    with pytest.raises((PathOutsideSandbox, SandboxFileNotFound)):
        beneath.read_file(root, name, 1 << 20)


def test_writes_never_leave_the_root(root: Path, resolver: str, tmp_path: Path) -> None:
    for name in ("abs-link", "up-link", "dir-link/new.txt", "dir-link/sub/new.txt"):
        with pytest.raises(PathOutsideSandbox):
            beneath.write_file(root, name, b"pwned", 0o644)
    assert (tmp_path / "secret.txt").read_text() == "outside\n"
    assert not (tmp_path / "new.txt").exists() and not (tmp_path / "sub").exists()
    beneath.write_file(root, "d/e/new.txt", b"ok", 0o600)
    assert beneath.read_file(root, "d/e/new.txt", 1 << 20) == b"ok"


def test_archives_store_links_and_unpack_beneath(root: Path, resolver: str, tmp_path: Path) -> None:
    members = {m.name: m for m in tarfile.open(fileobj=io.BytesIO(beneath.pack(root, "", "top")))}
    assert members["top/abs-link"].issym() and members["top/d/f.txt"].isfile()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("x.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"new"))
    with pytest.raises(PathOutsideSandbox):
        beneath.unpack(root, "dir-link", buf.getvalue())
    assert not (tmp_path / "x.txt").exists()
    beneath.unpack(root, "abs-dir", buf.getvalue())
    assert (root / "abs-dir" / "x.txt").read_bytes() == b"new"
    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w") as tar:
        info = tarfile.TarInfo("../escape.txt")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(PathOutsideSandbox):
        beneath.unpack(root, "d", evil.getvalue())


def test_special_files_are_refused_before_they_are_opened(root: Path, resolver: str) -> None:
    os.mkfifo(root / "fifo.py")
    os.symlink("fifo.py", root / "fifo-link.py")
    nodes = ["fifo.py", "fifo-link.py"]
    if os.geteuid() == 0:
        os.mknod(root / "zero.py", 0o600 | stat.S_IFCHR, os.makedev(1, 5))
        nodes.append("zero.py")
    refused = (NotARegularFile, PathOutsideSandbox)  # the walk refuses every link
    for name in nodes:  # a blocking open of the FIFO would hang this test
        with pytest.raises(refused):
            beneath.read_file(root, name, 1 << 20)
        with pytest.raises(refused):
            beneath.write_file(root, name, b"pwned", 0o644)
    assert stat.S_ISFIFO(os.lstat(root / "fifo.py").st_mode)


def test_size_is_the_targets_and_capped(root: Path, resolver: str) -> None:
    (root / "big.bin").write_bytes(b"x" * 5000)
    os.symlink("big.bin", root / "small.py")
    if resolver == "walk":  # the walk refuses every link: the file itself then
        with pytest.raises(PathOutsideSandbox):
            beneath.read_file(root, "small.py", 4096)
        os.unlink(root / "small.py")
        os.rename(root / "big.bin", root / "small.py")
    with pytest.raises(FileTooLarge) as info:
        beneath.read_file(root, "small.py", 4096)
    assert info.value.size == 5000 and info.value.limit == 4096
    assert beneath.read_file(root, "small.py", 5000) == b"x" * 5000


def test_write_through_a_dangling_link_is_a_file_error(root: Path, resolver: str) -> None:
    os.symlink("missing.py", root / "dangling.py")
    with pytest.raises((SandboxFileError, PathOutsideSandbox)):
        beneath.write_file(root, "dangling.py", b"x", 0o644)
    assert not (root / "missing.py").exists()
