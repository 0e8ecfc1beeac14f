"""Fork snapshots copy a tree the sandbox controls without following its links, even when
a directory turns into a link between the copy's look at it and its open."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from patchgym_sandbox.local import snapcopy


def _host_secret(tmp_path: Path) -> Path:
    host = tmp_path / "host"
    host.mkdir()
    (host / "key").write_text("host secret\n")
    return host


def test_links_are_copied_as_links(tmp_path: Path) -> None:
    host = _host_secret(tmp_path)
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "d").mkdir(parents=True)
    (src / "d" / "f").write_text("mine\n")
    (src / "to-host").symlink_to(host)
    (src / "to-key").symlink_to(host / "key")
    os.mkfifo(src / "fifo")
    dst.mkdir()
    snapcopy.copy_beneath(src, dst)
    assert (dst / "d" / "f").read_text() == "mine\n"
    assert os.readlink(dst / "to-host") == str(host)
    assert os.readlink(dst / "to-key") == str(host / "key")
    assert stat.S_ISFIFO((dst / "fifo").lstat().st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="whiteouts and owners need root")
def test_whiteouts_owners_and_modes_are_kept(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    os.mknod(src / "gone", stat.S_IFCHR | 0o000, 0)
    (src / "owned").write_text("x")
    os.chown(src / "owned", 100_000, 100_000)
    os.chmod(src / "owned", 0o640)
    snapcopy.copy_beneath(src, dst)
    st = (dst / "gone").lstat()
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == 0
    st = (dst / "owned").lstat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (100_000, 100_000, 0o640)


@pytest.mark.parametrize("kind", ["dir", "file"])
def test_a_swap_between_look_and_open_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The race a parent wins with renameat2(RENAME_EXCHANGE), made certain: the entry is
    a directory (file) when the copy stats it and a link to this machine's files when it
    opens it."""
    host = _host_secret(tmp_path)
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    if kind == "dir":
        (src / "x").mkdir()
        (src / "x" / "f").write_text("mine\n")
    else:
        (src / "x").write_text("mine\n")
    real_stat = os.stat

    def racing_stat(name: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        st = real_stat(name, *args, **kwargs)
        if name == "x" and kwargs.get("dir_fd") is not None:
            os.rename(src / "x", src / "x.old")
            os.symlink(host if kind == "dir" else host / "key", src / "x")
        return st

    monkeypatch.setattr(snapcopy.os, "stat", racing_stat)
    snapcopy.copy_beneath(src, dst)
    monkeypatch.undo()
    copied = [p.read_bytes() for p in dst.rglob("*") if p.is_file() and not p.is_symlink()]
    assert b"host secret\n" not in copied, "the copy followed a link swapped in mid-copy"
