"""Driver-side file operations that never leave a directory, whatever links it holds.

A sandbox's working copy is written by a hostile policy: any path component may be a
symlink planted to point at ``/proc/self/environ``, ``/etc`` or the driver's virtualenv.
Every function here takes an open directory (``root``: a path on this machine that is the
sandbox's side of the boundary) and a path relative to it, and resolves it with
``openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)``: relative links that stay beneath
``root`` are followed, absolute links, ``..`` out of it and ``/proc`` magic links are
refused (:class:`~patchgym_sandbox.errors.PathOutsideSandbox`). Kernels without
``openat2`` (before 5.6) get a component-by-component walk with ``O_NOFOLLOW`` (which
refuses every link). Each step is one system call on a file descriptor, so a policy that
swaps a directory for a link between two calls gains nothing.

Archives are packed and unpacked the same way: packing never follows a link (links are
stored as links), unpacking creates every entry through descriptors opened beneath the
destination and refuses absolute names, ``..`` and device nodes.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import io
import os
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path

from patchgym_sandbox.errors import (
    FileTooLarge,
    NotARegularFile,
    PathOutsideSandbox,
    SandboxFileError,
    SandboxFileNotFound,
)

SYS_OPENAT2 = 437  # the same number on every architecture (asm-generic)
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_BENEATH = 0x08
_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_openat2_works: bool | None = None


def _openat2(dirfd: int, rel: str, flags: int, mode: int) -> int:
    creates = flags & os.O_CREAT or (flags & os.O_TMPFILE) == os.O_TMPFILE
    mode = mode if creates else 0  # openat2 insists
    how = _OpenHow(flags | os.O_CLOEXEC, mode, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
    fd = _syscall(
        ctypes.c_long(SYS_OPENAT2), ctypes.c_int(dirfd), ctypes.c_char_p(rel.encode()),
        ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)),
    )  # fmt: skip
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), rel)
    return int(fd)


def _walk(dirfd: int, rel: str, flags: int, mode: int) -> int:
    """The fallback: every component opened with O_NOFOLLOW relative to the previous one."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise OSError(errno.EXDEV, "'..' in a path beneath the sandbox root", rel)
    fd = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dirfd)
    try:
        for part in parts[:-1]:
            nxt = _no_link(os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd))
            os.close(fd)
            fd = nxt
        last = parts[-1] if parts else "."
        try:
            return _no_link(os.open(last, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd))
        except NotADirectoryError:  # O_DIRECTORY | O_NOFOLLOW on a link
            if stat.S_ISLNK(os.stat(last, dir_fd=fd, follow_symlinks=False).st_mode):
                raise OSError(errno.ELOOP, "a link in a path beneath the sandbox root") from None
            raise
    finally:
        os.close(fd)


def _no_link(fd: int) -> int:
    """O_PATH | O_NOFOLLOW opens a link itself: refuse it like O_NOFOLLOW alone would."""
    if stat.S_ISLNK(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.ELOOP, "a link in a path beneath the sandbox root")
    return fd


def open_beneath(dirfd: int, rel: str, flags: int, mode: int = 0o644) -> int:
    """``open(rel, flags)`` relative to ``dirfd``, never resolving outside it."""
    global _openat2_works
    rel = rel.strip("/") or "."
    try:
        if _openat2_works is not False:
            try:
                fd = _openat2(dirfd, rel, flags, mode)
                _openat2_works = True
                return fd
            except OSError as exc:
                if exc.errno not in (errno.ENOSYS, errno.EPERM) or _openat2_works:
                    raise
                _openat2_works = False
        return _walk(dirfd, rel, flags, mode)
    except OSError as exc:
        if exc.errno in (errno.EXDEV, errno.ELOOP):
            raise PathOutsideSandbox(
                f"{rel!r} leads out of the sandbox through a link; refused"
            ) from exc
        raise


@contextlib.contextmanager
def opened(dirfd: int, rel: str, flags: int, mode: int = 0o644) -> Iterator[int]:
    fd = open_beneath(dirfd, rel, flags, mode)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def root_fd(root: Path) -> Iterator[int]:
    """A descriptor of the sandbox root itself (opened by its trusted host path)."""
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def makedirs(dirfd: int, rel: str, mode: int = 0o755) -> int:
    """Create ``rel`` and its parents beneath ``dirfd``; returns an O_PATH fd of it."""
    fd = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dirfd)
    for part in [p for p in rel.split("/") if p not in ("", ".")]:
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, mode, dir_fd=fd)
            nxt = open_beneath(fd, part, os.O_PATH | os.O_DIRECTORY)
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        fd = nxt
    return fd


def _split(rel: str) -> tuple[str, str]:
    rel = rel.strip("/")
    parent, _, name = rel.rpartition("/")
    if not name:
        raise PathOutsideSandbox("a file path needs a name")
    return parent, name


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words (for errors shown to a policy)."""
    for test, word in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return word
    return "not a regular file"


def _regular(fd: int, rel: str) -> os.stat_result:
    """fstat of the open handle; anything but a regular file is refused before any I/O."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        kind = kind_of(st.st_mode)
        raise NotARegularFile(f"{rel!r} is {kind}, not a regular file; refused", kind=kind)
    return st


def _open_regular(
    dirfd: int, rel: str, access: int, mode: int = 0o644, *, create: bool = False
) -> int:
    """Open ``rel`` for ``access`` only once it is known to be a regular file.

    The path is first opened ``O_PATH`` (which never runs a device's or FIFO's open), that
    handle is checked with ``fstat``, and the same inode is then reopened through
    ``/proc/self/fd``: a name swapped meanwhile changes nothing. ``create`` makes a new
    file (``O_EXCL``, so never through a link) when nothing is there.
    """
    if create:
        try:
            return open_beneath(dirfd, rel, access | os.O_CREAT | os.O_EXCL | os.O_NOCTTY, mode)
        except FileExistsError:
            pass
    handle = open_beneath(dirfd, rel, os.O_PATH)
    try:
        _regular(handle, rel)
        return os.open(f"/proc/self/fd/{handle}", access | os.O_NOCTTY | os.O_CLOEXEC)
    finally:
        os.close(handle)


def read_file(root: Path, rel: str, max_bytes: int) -> bytes:
    """The bytes of a regular file beneath ``root``, checked on its handle, at most ``max_bytes``."""
    with root_fd(root) as top:
        try:
            fd = _open_regular(top, rel, os.O_RDONLY)
            try:
                st = os.fstat(fd)
                if st.st_size > max_bytes:
                    raise FileTooLarge(
                        f"{rel!r} is {st.st_size} bytes, over the {max_bytes}-byte read limit",
                        size=st.st_size,
                        limit=max_bytes,
                    )
                chunks, left = [], max_bytes + 1  # a file growing past the cap is caught
                while left > 0 and (chunk := os.read(fd, min(1 << 20, left))):
                    chunks.append(chunk)
                    left -= len(chunk)
                if left <= 0:
                    raise FileTooLarge(
                        f"{rel!r} grew past the {max_bytes}-byte read limit while read",
                        limit=max_bytes,
                    )
                return b"".join(chunks)
            finally:
                os.close(fd)
        except NotARegularFile:
            raise
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
            raise SandboxFileNotFound(f"no file {rel!r} in the sandbox") from exc


def write_file(root: Path, rel: str, data: bytes, mode: int) -> None:
    parent, name = _split(rel)
    with root_fd(root) as top:
        pfd = makedirs(top, parent)
        try:
            try:
                fd = _open_regular(pfd, name, os.O_WRONLY, mode, create=True)
            except NotARegularFile:
                raise
            except FileNotFoundError as exc:  # a dangling link in the name's place
                raise SandboxFileError(f"{rel!r} is a dangling link; refused") from exc
            try:
                os.ftruncate(fd, 0)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
        finally:
            os.close(pfd)


def is_dir(root: Path, rel: str) -> bool:
    with root_fd(root) as top:
        try:
            with opened(top, rel, os.O_PATH | os.O_DIRECTORY):
                return True
        except (OSError, PathOutsideSandbox):
            return False


# -- archives ---------------------------------------------------------------------------
def pack(root: Path, rel: str, arcname: str) -> bytes:
    """A tar of ``rel`` whose single top entry is ``arcname``; links are stored, not followed."""
    parent, name = _split(rel) if rel.strip("/") else ("", "")
    buf = io.BytesIO()
    with root_fd(root) as top, tarfile.open(fileobj=buf, mode="w") as tar:
        try:
            pfd = open_beneath(top, parent, os.O_PATH | os.O_DIRECTORY)
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise SandboxFileNotFound(f"no file or directory {rel!r} in the sandbox") from exc
        try:
            if not name:
                _pack_dir(tar, pfd, ".", arcname)
            else:
                try:
                    st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
                except FileNotFoundError as exc:
                    raise SandboxFileNotFound(
                        f"no file or directory {rel!r} in the sandbox"
                    ) from exc
                _pack_entry(tar, pfd, name, arcname, st)
        finally:
            os.close(pfd)
    return buf.getvalue()


def _info(arcname: str, st: os.stat_result) -> tarfile.TarInfo:
    info = tarfile.TarInfo(arcname)
    info.mode = stat.S_IMODE(st.st_mode)
    info.mtime = int(st.st_mtime)
    info.uid, info.gid = st.st_uid, st.st_gid
    return info


def _pack_entry(tar: tarfile.TarFile, dirfd: int, name: str, arc: str, st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode):
        info = _info(arc, st)
        info.type = tarfile.SYMTYPE
        info.linkname = os.readlink(name, dir_fd=dirfd)
        tar.addfile(info)
    elif stat.S_ISDIR(st.st_mode):
        _pack_dir(tar, dirfd, name, arc)
    elif stat.S_ISREG(st.st_mode):
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd)
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            info = _info(arc, st)
            info.size = st.st_size
            tar.addfile(info, fh)
    # sockets, fifos and devices are skipped: nothing to copy


def _pack_dir(tar: tarfile.TarFile, dirfd: int, name: str, arc: str) -> None:
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd)
    try:
        info = _info(arc, os.fstat(fd))
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        for child in sorted(os.listdir(fd)):
            st = os.stat(child, dir_fd=fd, follow_symlinks=False)
            _pack_entry(tar, fd, child, f"{arc}/{child}", st)
    finally:
        os.close(fd)


def unpack(root: Path, dest_rel: str, data: bytes) -> None:
    """Extract a tar into ``dest_rel`` (created), every entry created beneath it."""
    with root_fd(root) as top:
        dest = makedirs(top, dest_rel)
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
                for member in tar:
                    _unpack_member(tar, dest, member)
        finally:
            os.close(dest)


def _unpack_member(tar: tarfile.TarFile, dest: int, m: tarfile.TarInfo) -> None:
    name = m.name.strip("/") if not m.name.startswith("/") else ""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        if name in ("", ".") and m.isdir():
            return
        raise PathOutsideSandbox(f"archive member {m.name!r} would land outside; refused")
    parent = makedirs(dest, "/".join(parts[:-1]))
    last = parts[-1]
    try:
        if m.isdir():
            os.close(makedirs(parent, last, 0o755))
            with opened(parent, last, os.O_RDONLY | os.O_DIRECTORY) as fd:
                os.fchmod(fd, m.mode & 0o777 or 0o755)
        elif m.issym():
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                os.unlink(last, dir_fd=parent)
            os.symlink(m.linkname, last, dir_fd=parent)
        elif m.isfile() or m.islnk():
            src = tar.extractfile(m)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(last, dir_fd=parent)  # a planted link is replaced, never followed
            fd = os.open(
                last, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600, dir_fd=parent,
            )  # fmt: skip
            with os.fdopen(fd, "wb") as out:
                if src is not None:
                    while chunk := src.read(1 << 20):
                        out.write(chunk)
                os.fchmod(out.fileno(), m.mode & 0o777 or 0o644)
        # devices, fifos: refused silently (a sandbox file API has no use for them)
    finally:
        os.close(parent)
