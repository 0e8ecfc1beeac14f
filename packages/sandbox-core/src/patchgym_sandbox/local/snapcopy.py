"""Copy a tree the sandbox controls, as root, without ever following one of its links.

A fork snapshot copies a live sandbox's upper layer and ``/tmp`` while its processes may
be swapping directories for symlinks (``renameat2(RENAME_EXCHANGE)``). ``cp -a`` opens
each path from the top again, so a swap between two steps sends root's copy through the
link to this machine's files. Here every step is one call on a descriptor: each name is
opened relative to its parent's descriptor with ``O_NOFOLLOW`` and checked with ``fstat``
on the handle, so a swap can change what is copied (the sandbox's own files, as they
were at some moment) but never where a read goes. Links are recreated as links, overlay
whiteouts (0/0 character devices) and FIFOs as such, other device nodes and sockets are
left out; owners, modes, times and extended attributes (overlay's ``trusted.*``) are kept.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

MAX_DEPTH = 512
"""Deeper trees are refused (each level holds two descriptors while it is copied)."""
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


class TreeTooDeep(OSError):
    """The tree nests directories deeper than :data:`MAX_DEPTH`."""


def copy_beneath(source: Path, target: Path) -> None:
    """Copy the contents and attributes of directory ``source`` into the existing, empty
    directory ``target`` (driver-owned)."""
    src = os.open(source, _DIR)
    try:
        dst = os.open(target, _DIR)
        try:
            _copy_dir(src, dst, 0)
            _attrs(dst, os.fstat(src), src)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _copy_dir(src: int, dst: int, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise TreeTooDeep(f"directories nest deeper than {MAX_DEPTH} levels")
    for name in os.listdir(src):
        with contextlib.suppress(FileNotFoundError):  # removed while we copy: left out
            _copy_entry(src, dst, name, depth)


def _copy_entry(src: int, dst: int, name: str, depth: int) -> None:
    st = os.stat(name, dir_fd=src, follow_symlinks=False)
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        try:
            child = os.open(name, _DIR, dir_fd=src)
        except OSError:  # swapped for a link or a file since the stat: left out
            return
        try:
            os.mkdir(name, 0o700, dir_fd=dst)
            out = os.open(name, _DIR, dir_fd=dst)
            try:
                _copy_dir(child, out, depth + 1)
                _attrs(out, os.fstat(child), child)
            finally:
                os.close(out)
        finally:
            os.close(child)
    elif stat.S_ISREG(mode):
        _copy_file(src, dst, name)
    elif stat.S_ISLNK(mode):
        os.symlink(os.readlink(name, dir_fd=src), name, dir_fd=dst)
        os.chown(name, st.st_uid, st.st_gid, dir_fd=dst, follow_symlinks=False)
    elif (stat.S_ISCHR(mode) and st.st_rdev == 0) or stat.S_ISFIFO(mode):
        os.mknod(name, mode, 0, dir_fd=dst)  # an overlay whiteout, or a FIFO
        os.chown(name, st.st_uid, st.st_gid, dir_fd=dst, follow_symlinks=False)


def _copy_file(src: int, dst: int, name: str) -> None:
    try:
        fd = os.open(name, _FILE, dir_fd=src)
    except OSError:  # swapped for a link since the stat: left out
        return
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return
        os.set_blocking(fd, True)
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600,
                      dir_fd=dst)  # fmt: skip
        try:
            left = st.st_size
            while left > 0:
                n = os.sendfile(out, fd, None, min(left, 1 << 30))
                if n == 0:
                    break  # shrank while we copied
                left -= n
            _attrs(out, st, fd)
        finally:
            os.close(out)
    finally:
        os.close(fd)


def _attrs(out: int, st: os.stat_result, src: int) -> None:
    with contextlib.suppress(OSError):
        for key in os.listxattr(src):
            os.setxattr(out, key, os.getxattr(src, key))
    os.fchown(out, st.st_uid, st.st_gid)
    os.fchmod(out, stat.S_IMODE(st.st_mode))
    os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
