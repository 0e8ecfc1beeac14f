"""The sandbox's root is an unprivileged user of this machine (the rootless-podman model).

The driver runs as root (it mounts overlays and makes cgroups), but nothing it starts for
a sandbox keeps root: bubblewrap is started as :data:`SANDBOX_UID` (a uid from the
subordinate range no login uses) and makes a user namespace in which that uid is 0. Root
inside is that uid outside: a sysctl, a signal, a file under ``/proc/sys`` or a missed mount
acts with an unprivileged user's rights on this machine.

Files follow: the template is seen through an *idmapped* read-only mount (host uid ``k``
appears as ``SANDBOX_UID + k``), so the template's root-owned files belong to the sandbox's
root without a copy or a ``chown``; the overlay's upper layer, ``/tmp`` and the driver's
own writes into a sandbox (:func:`as_user`) are made by that uid.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
import struct
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

SANDBOX_UID = 100_000
"""Host uid (and gid) of a sandbox's root: the first of the subordinate range rootless
podman gives its first user, owned by no login."""
ID_RANGE = 65_536
"""uids ``0..ID_RANGE`` of a template map to ``SANDBOX_UID + uid`` in its idmapped view."""

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 428, 429, 442  # asm-generic: every arch
SYS_SETGROUPS = {"x86_64": 116, "aarch64": 159}
SYS_SETRESUID = {"x86_64": 117, "aarch64": 147}
SYS_SETRESGID = {"x86_64": 119, "aarch64": 149}
PR_GET_DUMPABLE, PR_SET_DUMPABLE = 3, 4
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
AT_FDCWD, AT_EMPTY_PATH, AT_RECURSIVE = -100, 0x1000, 0x8000
OPEN_TREE_CLONE, OPEN_TREE_CLOEXEC = 1, 0o2000000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 0x1, 0x2, 0x4
MOUNT_ATTR_IDMAP = 0x100000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
CLONE_NEWNS = 0x20000
MS_REC, MS_PRIVATE, MS_BIND, MS_RDONLY, MS_REMOUNT = 0x4000, 0x40000, 0x1000, 0x1, 0x20
MNT_DETACH = 2

_DUMPABLE = _libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
"""This process's dumpable flag before any :func:`thread_identity` changed it."""
_userns_lock = threading.Lock()
_userns_fds: dict[int, int] = {}


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def userns_fd(uid: int = SANDBOX_UID) -> int:
    """A user namespace mapping ``0..ID_RANGE`` to ``uid..``: the idmap of template views
    (made once per process, by a helper that unshares and is killed once it is mapped)."""
    with _userns_lock:
        if uid in _userns_fds:
            return _userns_fds[uid]
        helper = subprocess.Popen(["unshare", "--user", "sleep", "60"])
        try:
            mine = os.readlink("/proc/self/ns/user")
            deadline = time.monotonic() + 10
            while os.readlink(f"/proc/{helper.pid}/ns/user") == mine:
                if time.monotonic() > deadline:
                    raise OSError("the user namespace helper did not start")
                time.sleep(0.002)
            for name in ("uid_map", "gid_map"):
                Path(f"/proc/{helper.pid}/{name}").write_text(f"0 {uid} {ID_RANGE}\n")
            fd = os.open(f"/proc/{helper.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            helper.kill()
            helper.wait()
        _userns_fds[uid] = fd
        return fd


def mount_idmapped(source: Path, target: Path, uid: int = SANDBOX_UID) -> None:
    """Mount a read-only, nosuid, nodev view of ``source`` at ``target`` whose files belong
    to ``uid + their owner``; the tree itself is not touched."""
    tree = _check(
        _libc.syscall(SYS_OPEN_TREE, AT_FDCWD, str(source).encode(),
                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE),
        f"open_tree {source}",
    )  # fmt: skip
    try:
        attr = struct.pack(
            "QQQQ", MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            0, 0, userns_fd(uid),
        )  # fmt: skip
        buf = ctypes.create_string_buffer(attr, len(attr))
        _check(
            _libc.syscall(SYS_MOUNT_SETATTR, tree, b"", AT_EMPTY_PATH | AT_RECURSIVE, buf, len(attr)),
            f"idmap {source} (the filesystem must support idmapped mounts: ext4, xfs, btrfs, tmpfs)",
        )  # fmt: skip
        _check(
            _libc.syscall(SYS_MOVE_MOUNT, tree, b"", AT_FDCWD, str(target).encode(),
                          MOVE_MOUNT_F_EMPTY_PATH),
            f"move_mount {target}",
        )  # fmt: skip
    finally:
        os.close(tree)


def own(path: Path, uid: int = SANDBOX_UID) -> Path:
    """``lchown`` one directory the driver just made for the sandbox (never a tree)."""
    os.lchown(path, uid, uid)
    return path


def become(uid: int = SANDBOX_UID) -> None:
    """In a child before exec: drop every group and become ``uid`` for good."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


STAGE = Path("/tmp")
"""Where :func:`private_mounts` stages the sandbox's host paths, on a tmpfs of its own."""


def staged_over(program: str) -> str | None:
    """Why ``program`` (the runtime: bwrap, runsc) cannot start sandboxes for this driver,
    or None: run as root, the driver starts it in a mount namespace where :data:`STAGE` is
    the staging tmpfs (:func:`private_mounts`), so a runtime that lives beneath ``/tmp``
    (itself or where a link to it leads) is not there to exec."""
    real = Path(os.path.realpath(program))
    if os.geteuid() != 0 or not real.is_relative_to(STAGE):
        return None
    return (
        f"{program} lives beneath {STAGE} ({real}): run as root, the local backend starts it "
        f"where {STAGE} holds only a sandbox's staged paths; install it outside {STAGE} "
        "(apt-get, or copy it to /usr/local/bin)"
    )


def private_mounts(sources: list[Path], detach: Sequence[Path] = ()) -> list[Path]:
    """In a child before exec, or a thread that then starts it (still root): a mount
    namespace of its own with a fresh tmpfs on :data:`STAGE` and each of ``sources`` bound
    on ``STAGE/<index>``, where the unprivileged bubblewrap can reach it however deep it
    sits beneath directories only root may enter (a state dir under ``/root``, pytest's
    0700 temporary dirs). Each source is opened before anything is covered. Returns the
    staged paths, in order.

    ``detach``: folders whose mounts bubblewrap has no use for once the sources are staged
    (the state dir: every open sandbox's working copy and tmpfs). They leave this namespace
    (:func:`detach_beneath`), so bubblewrap copies, and reads once per mount it makes, a
    mount table that does not grow with the sandboxes open: with 100 open here, a start
    took 43 ms instead of 25 and 57 ms of CPU instead of 30."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare mount namespace")
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    fds = [os.open(src, os.O_PATH | os.O_CLOEXEC) for src in sources]  # this namespace's
    anchors = [(d, os.open(d, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)) for d in detach]
    _check(_libc.mount(b"tmpfs", bytes(STAGE), b"tmpfs", 0, b"mode=0755,size=1m"), "stage tmpfs")
    staged = []
    for i, fd in enumerate(fds):
        stage = STAGE / str(i)
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            stage.mkdir()
        else:
            stage.touch()
        _check(_libc.mount(f"/proc/self/fd/{fd}".encode(), bytes(stage), None,
                           MS_BIND | MS_REC, None), f"bind {sources[i]}")  # fmt: skip
        os.close(fd)
        staged.append(stage)
    for folder, fd in anchors:
        try:
            detach_beneath(folder, fd)
        finally:
            os.close(fd)
    return staged


def detach_beneath(folder: Path, fd: int) -> int:
    """Detach, from this thread's mount namespace, every mount beneath ``folder`` (opened
    as ``fd`` before :data:`STAGE` could cover it: reached through the descriptor, a mount
    beneath a covered folder is still found). Deepest first; a mount that is gone already is
    passed over. Returns how many were detached."""
    prefix = str(folder).rstrip("/") + "/"
    with open("/proc/thread-self/mountinfo", "rb") as fh:
        points = [_unescape(line.split(b" ", 5)[4]) for line in fh]
    detached = 0
    for point in sorted((p for p in points if p.startswith(prefix)), reverse=True):
        path = f"/proc/self/fd/{fd}/{point[len(prefix) :]}".encode()
        if _libc.umount2(path, MNT_DETACH) == 0:
            detached += 1
    return detached


def _unescape(field: bytes) -> str:
    """A mount point as ``mountinfo`` writes it (space, tab, newline, backslash as octal)."""
    if b"\\" in field:
        for code in (b"\\040", b"\\011", b"\\012", b"\\134"):
            field = field.replace(code, bytes([int(code[1:], 8)]))
    return os.fsdecode(field)


def staged_paths(sources: list[Path]) -> list[Path]:
    """Where :func:`private_mounts` will put ``sources`` (for the argv built before)."""
    return [STAGE / str(i) for i in range(len(sources))]


def _setgroups_thread(groups: list[int]) -> None:
    """``setgroups`` for this thread only (glibc's wrapper changes every thread)."""
    arr = (ctypes.c_uint * max(1, len(groups)))(*groups)
    nr = SYS_SETGROUPS[os.uname().machine]
    _check(_libc.syscall(nr, len(groups), arr), "setgroups")


@contextlib.contextmanager
def as_user(uid: int | None) -> Iterator[None]:
    """Run the block's file operations (this thread only) with ``uid``'s file rights: what
    the driver writes into a sandbox belongs to the sandbox's root, and what it reads is
    only what that root could read. ``None``: unchanged (no isolation)."""
    if uid is None or os.geteuid() != 0:
        yield
        return
    groups = os.getgroups()
    _setgroups_thread([])
    _libc.setfsgid(uid)
    _libc.setfsuid(uid)
    try:
        yield
    finally:
        _libc.setfsuid(0)
        _libc.setfsgid(0)
        _setgroups_thread(groups)


def thread_identity_supported() -> bool:
    """Whether :func:`thread_identity` works here (a root driver on a known architecture)."""
    return os.geteuid() == 0 and os.uname().machine in SYS_SETRESUID


@contextlib.contextmanager
def thread_identity(uid: int = SANDBOX_UID) -> Iterator[None]:
    """This thread alone becomes ``uid`` (also its gid, no supplementary groups, no ambient
    capabilities) for the block, then root again: what it starts meanwhile is ``uid`` for
    good (``exec`` sets the saved ids to the effective ones, and a non-root exec without
    file capabilities keeps none), exactly as :func:`become` in the child would make it.
    Python then starts the child with ``vfork``: it refuses to for ``Popen(user=...)``,
    whose ``fork`` copies the driver's page tables (~6 ms for a 120 MB driver).

    The saved ids stay 0 so the thread can return; a change of effective id
    makes the kernel mark the whole process non-dumpable, which is undone on the way back.
    Only for a dedicated thread (see :mod:`.ownthread`)."""
    machine = os.uname().machine
    groups, uids, gids = os.getgroups(), os.getresuid(), os.getresgid()
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL: none to clear
    _setgroups_thread([])
    try:
        _check(_libc.syscall(SYS_SETRESGID[machine], uid, uid, 0), "setresgid")
        try:
            _check(_libc.syscall(SYS_SETRESUID[machine], uid, uid, 0), "setresuid")
            try:
                yield
            finally:
                _check(_libc.syscall(SYS_SETRESUID[machine], *uids), "setresuid back")
        finally:
            _check(_libc.syscall(SYS_SETRESGID[machine], *gids), "setresgid back")
    finally:
        _setgroups_thread(groups)
        if _DUMPABLE > 0:  # the last thread back restores it (each change resets it)
            _libc.prctl(PR_SET_DUMPABLE, _DUMPABLE, 0, 0, 0)
