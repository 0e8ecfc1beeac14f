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

import bisect
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


def private_mounts(
    sources: list[Path], detach: Sequence[Path] = (), keep: Sequence[str] | None = None
) -> list[Path]:
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
    took 43 ms instead of 25 and 57 ms of CPU instead of 30.

    ``keep`` (None: every other mount stays): the namespace's root becomes the root
    filesystem alone, with only the mounts at or beneath :data:`NEEDED` and ``keep``
    (where the runtime itself lives) and the stage (:func:`_minimal_root`); the rest of
    this machine's mounts leave it at once. A Docker or Kubernetes host holds hundreds (a
    container's overlay and namespaces, a pod's volumes), each one copied and parsed at
    each of bubblewrap's ~24 mount steps: with 72 here (48 of them left by killed test
    runs) bubblewrap took 19 ms to start ``true``, 9 ms with 24."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare mount namespace")
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    fds = [os.open(src, os.O_PATH | os.O_CLOEXEC) for src in sources]  # this namespace's
    anchors: list[tuple[Path, int | None]] = [
        (d, os.open(d, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)) for d in detach
    ]
    try:
        if keep is not None and _minimal_root([*NEEDED, *keep], fds, sources):
            anchors = [(d, _reopen(d, fd)) for d, fd in anchors if fd is not None]  # anew
        else:
            _stage(fds, sources, STAGE)
        for folder, fd in anchors:
            if fd is not None:
                detach_beneath(folder, fd)
    finally:
        for fd in [*fds, *(a for _, a in anchors if a is not None)]:
            os.close(fd)
    return staged_paths(sources)


def _stage(fds: list[int], sources: list[Path], base: Path) -> None:
    """A fresh tmpfs on ``base`` and ``sources[i]`` (opened as ``fds[i]``) bound on
    ``base/<i>``."""
    _check(_libc.mount(b"tmpfs", bytes(base), b"tmpfs", 0, b"mode=0755,size=1m"), "stage tmpfs")
    for i, fd in enumerate(fds):
        stage = base / str(i)
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            stage.mkdir()
        else:
            stage.touch()
        _check(_libc.mount(f"/proc/self/fd/{fd}".encode(), bytes(stage), None,
                           MS_BIND | MS_REC, None), f"bind {sources[i]}")  # fmt: skip


def _reopen(folder: Path, fd: int) -> int | None:
    """``folder`` opened anew where it is now (None: not there), ``fd`` closed."""
    os.close(fd)
    try:
        return os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None


NEEDED = ("/proc", "/dev", "/sys", "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64")
"""What a launcher reaches by host path once its sources are staged: ``/proc`` (bubblewrap's
own files, the ``/proc/sys`` it binds), ``/dev`` (the nodes of ``--dev`` and the masks),
``/sys`` (the driver's cgroup writes before the exec), and the system's programs and
libraries (bubblewrap and what it loads)."""
SCRATCH_ROOT = STAGE / "r"
OLD = "old"
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}


def _minimal_root(keep: Sequence[str], fds: list[int], sources: list[Path]) -> bool:
    """Make this namespace's root the root filesystem alone (no mount beneath it), with
    each folder of ``keep`` that has mounts at or beneath it bound back recursively (a
    folder that is only a directory of the root filesystem is there already), and the
    stage of ``fds`` on :data:`STAGE`; every other mount leaves the namespace with one
    lazy unmount of the old root. False, with nothing changed, where ``pivot_root``
    cannot (the root is the initial ramfs, an unknown architecture): stage as before."""
    nr = SYS_PIVOT_ROOT.get(os.uname().machine)
    if nr is None:
        return False
    points = _mount_points()
    _check(_libc.mount(b"tmpfs", bytes(STAGE), b"tmpfs", 0, b"mode=0700,size=1m"), "scratch tmpfs")
    try:
        new = SCRATCH_ROOT
        new.mkdir()
        _check(_libc.mount(b"/", bytes(new), None, MS_BIND, None), "bind the root filesystem")
        for folder in _bound_back(keep, points):
            _check(_libc.mount(folder.encode(), f"{new}{folder}".encode(), None,
                               MS_BIND | MS_REC, None), f"bind {folder}")  # fmt: skip
        _stage(fds, sources, Path(f"{new}{STAGE}"))
        old = Path(f"{new}{STAGE}") / OLD
        old.mkdir()
        if _libc.syscall(nr, bytes(new), bytes(old)) < 0:
            raise OSError(ctypes.get_errno(), "pivot_root")
    except OSError:
        _libc.umount2(bytes(STAGE), MNT_DETACH)  # the scratch, and all made on it
        return False
    os.chdir("/")
    _check(_libc.umount2(str(STAGE / OLD).encode(), MNT_DETACH), "detach the old root")
    os.rmdir(STAGE / OLD)
    return True


def _bound_back(keep: Sequence[str], points: list[str]) -> list[str]:
    """The folders to bind into a root that holds the root filesystem alone, so that each
    of ``keep`` is as it was: the outermost mount holding it (a child of ``/``), or the
    folder itself where it is a plain directory with mounts beneath it. None twice.

    The table is sorted once, then each folder costs a walk up its path and a binary
    search: a Docker or Kubernetes host has hundreds of mounts, and comparing each folder
    with each of them took 0.85 ms of every start there with 500 (0.07 ms this way)."""
    mounted = set(points) - {"/"}
    ordered = sorted(points)
    chosen: list[str] = []
    for folder in sorted(keep):
        if not os.path.isdir(folder) or os.path.islink(folder):
            continue  # absent, or a link the root filesystem holds (/bin -> usr/bin)
        holders = [above for above in _upwards(folder) if above in mounted]
        if holders:
            target = holders[-1]  # the mount holding it, nearest to /
        elif _has_beneath(ordered, folder):
            target = folder
        else:
            continue
        if not any(_beneath(target, c) for c in chosen):
            chosen = [c for c in chosen if not _beneath(c, target)] + [target]
    return chosen


def _has_beneath(ordered: list[str], folder: str) -> bool:
    """Whether sorted ``ordered`` holds ``folder`` or a path beneath it."""
    folder = folder.rstrip("/")
    if not folder:  # /
        return bool(ordered)
    at = bisect.bisect_left(ordered, folder)
    if at < len(ordered) and ordered[at] == folder:
        return True
    at = bisect.bisect_left(ordered, folder + "/")
    return at < len(ordered) and ordered[at].startswith(folder + "/")


def _upwards(path: str) -> list[str]:
    """``path`` (absolute) and each folder above it, ``/`` last."""
    path = path.rstrip("/") or "/"
    out = [path]
    while path != "/":
        path = path.rpartition("/")[0] or "/"
        out.append(path)
    return out


def _mount_points(mountinfo: str = "/proc/thread-self/mountinfo") -> list[str]:
    """The mount point of each mount of this thread's namespace (or of the namespace whose
    ``mountinfo`` is given: another process's)."""
    with open(mountinfo, "rb") as fh:
        return [_unescape(line.split(b" ", 5)[4]) for line in fh]


def _beneath(point: str, folder: str) -> bool:
    return point == folder or point.startswith(folder.rstrip("/") + "/")


def detach_beneath(folder: Path, fd: int) -> int:
    """Detach, from this thread's mount namespace, every mount beneath ``folder`` (opened
    as ``fd`` before :data:`STAGE` could cover it: reached through the descriptor, a mount
    beneath a covered folder is still found). Deepest first; a mount that is gone already is
    passed over. Returns how many were detached."""
    prefix = str(folder).rstrip("/") + "/"
    detached = 0
    for point in sorted((p for p in _mount_points() if p.startswith(prefix)), reverse=True):
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
