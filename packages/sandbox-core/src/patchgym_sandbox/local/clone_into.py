"""Start a program straight into a cgroup v2 group: ``clone3(CLONE_INTO_CGROUP)``.

Writing a PID to ``cgroup.procs`` after the start takes the kernel's global threadgroup
lock and, unless the hierarchy is mounted with ``favordynmods``, waits for an RCU grace
period (tens of ms, one create at a time). A child born in its group takes that lock only
for reading. Python has no ``clone3``: :class:`CgroupPopen` is a :class:`subprocess.Popen`
whose child is made by the raw system call (through :class:`ctypes.PyDLL`, so the calling
thread keeps the interpreter's lock across it) and then makes nothing but prepared ctypes
calls (``dup2``, ``fcntl``, ``close_range``, ``setsid``, ``setgroups``/``setresgid``/
``setresuid``, ``signal``, ``execve``, ``_exit``) with arguments built before the clone:
no allocation by the C library, no lock another thread could hold, the collector off.

Needs Linux >= 5.9 (``close_range``; ``CLONE_INTO_CGROUP`` is 5.7) on x86-64 or arm64;
:func:`supported` says whether to use it.
"""

from __future__ import annotations

import ctypes
import gc
import inspect
import itertools
import os
import shutil
import signal
import subprocess
from typing import Any

from patchgym_sandbox.local.rootless import SYS_SETGROUPS, SYS_SETRESGID, SYS_SETRESUID

SYS_CLONE3, SYS_CLOSE_RANGE, SYS_EXIT_GROUP = 435, 436, {"x86_64": 231, "aarch64": 94}
CLONE_INTO_CGROUP = 0x200000000
F_SETFD = 2
_libc = ctypes.PyDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_PARAMS = list(inspect.signature(subprocess.Popen._execute_child).parameters)[1:]  # type: ignore[attr-defined]  # private, POSIX only


class _CloneArgs(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "flags", "pidfd", "child_tid", "parent_tid", "exit_signal", "stack",
            "stack_size", "tls", "set_tid", "set_tid_size", "cgroup",
        )
    ]  # fmt: skip


def supported() -> bool:
    """A kernel and machine this module can start children on."""
    release = os.uname().release.split("-")[0].split(".")
    try:
        version = (int(release[0]), int(release[1]))
    except (IndexError, ValueError):
        return False
    return version >= (5, 9) and os.uname().machine in SYS_EXIT_GROUP


def _cstrings(items: list[bytes]) -> ctypes.Array[ctypes.c_char_p]:
    return (ctypes.c_char_p * (len(items) + 1))(*items, None)


class CgroupPopen(subprocess.Popen):  # type: ignore[type-arg]
    """``Popen`` whose child starts in the cgroup v2 group open at ``cgroup_fd``.

    Supports what :func:`patchgym_sandbox.local.server.launch` uses: an argv list, ``env``,
    ``stdin``/``stdout``/``stderr`` (pipes or descriptors above 2), ``pass_fds``,
    ``start_new_session``; not ``preexec_fn``, ``cwd``, ``user``/``group``, ``shell`` or
    text mode. ``uid``: the child drops to that uid and gid, with no supplementary groups,
    before its exec (the caller stays root, which ``CLONE_INTO_CGROUP`` needs to write the
    group); without it, the child keeps the calling thread's identity."""

    def __init__(self, *args: Any, cgroup_fd: int, uid: int | None = None, **kwargs: Any) -> None:
        self._cgroup_fd = cgroup_fd
        self._identity = uid
        super().__init__(*args, **kwargs)

    def _execute_child(self, *args: Any) -> None:
        p = dict(zip(_PARAMS, args, strict=False))
        for unsupported in ("preexec_fn", "cwd", "uid", "gid", "gids", "umask"):
            if p.get(unsupported) not in (None, -1, ()):
                raise ValueError(f"CgroupPopen does not support {unsupported}")
        if p.get("shell") or p.get("process_group") not in (None, -1):
            raise ValueError("CgroupPopen does not support shell or process_group")
        argv = [os.fsencode(a) for a in p["args"]]
        env = p["env"] if p["env"] is not None else os.environ
        exe = p["executable"] or p["args"][0]
        if os.sep not in os.fsdecode(exe):
            found = shutil.which(os.fsdecode(exe), path=env.get("PATH", os.defpath))
            if found is None:
                raise FileNotFoundError(2, f"No such file or directory: {exe!r}")
            exe = found
        path = os.fsencode(exe)
        envp = [os.fsencode(k) + b"=" + os.fsencode(v) for k, v in env.items()]
        c_argv, c_envp = _cstrings(argv), _cstrings(envp)
        moves = [(p["p2cread"], 0), (p["c2pwrite"], 1), (p["errwrite"], 2)]
        if any(0 <= src <= 2 for src, _ in moves):
            raise ValueError("CgroupPopen needs the child's descriptors above 2")
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        keep = sorted({0, 1, 2, err_w, *p["pass_fds"]})
        gaps = [(a + 1, b - 1) for a, b in itertools.pairwise(keep) if b - a > 1]
        gaps.append((keep[-1] + 1, 0xFFFFFFFF))
        cargs = _CloneArgs(flags=CLONE_INTO_CGROUP, exit_signal=signal.SIGCHLD,
                           cgroup=self._cgroup_fd)  # fmt: skip
        machine = os.uname().machine
        exit_nr = SYS_EXIT_GROUP[machine]
        ident = self._identity
        drops = (
            []
            if ident is None
            else [
                (SYS_SETGROUPS[machine], 0, 0, 0),
                (SYS_SETRESGID[machine], ident, ident, ident),
                (SYS_SETRESUID[machine], ident, ident, ident),
            ]
        )
        errno_box = ctypes.c_int(0)
        syscall, dup2, fcntl, setsid = _libc.syscall, _libc.dup2, _libc.fcntl, _libc.setsid
        sigfn, execve, write = _libc.signal, _libc.execve, _libc.write
        c_long, c_int, sizeof, byref = ctypes.c_long, ctypes.c_int, ctypes.sizeof, ctypes.byref
        pass_fds, new_session = tuple(p["pass_fds"]), bool(p["start_new_session"])
        restore = bool(p["restore_signals"])
        sigpipe, sigxfsz, sig_dfl = c_int(signal.SIGPIPE), c_int(signal.SIGXFSZ), ctypes.c_void_p(0)
        gc_was = gc.isenabled()
        gc.disable()
        try:
            pid = syscall(c_long(SYS_CLONE3), byref(cargs), c_long(sizeof(cargs)))
            if pid == 0:  # the child: prepared C calls only, then execve or _exit
                for src, dst in moves:
                    if src != -1:
                        dup2(c_int(src), c_int(dst))
                for fd in pass_fds:
                    fcntl(c_int(fd), c_int(F_SETFD), c_int(0))
                for lo, hi in gaps:
                    syscall(c_long(SYS_CLOSE_RANGE), c_int(lo), ctypes.c_uint(hi), c_int(0))
                if new_session:
                    setsid()
                # the sandbox's uid for good (root until here); the first failure stops it
                if all(syscall(c_long(n), c_long(a), c_long(b), c_long(c)) == 0
                       for n, a, b, c in drops):  # fmt: skip
                    if restore:
                        sigfn(sigpipe, sig_dfl)
                        sigfn(sigxfsz, sig_dfl)
                    execve(path, c_argv, c_envp)
                errno_box.value = ctypes.get_errno()
                write(c_int(err_w), byref(errno_box), c_int(4))
                syscall(c_long(exit_nr), c_int(127))
        finally:
            if gc_was:
                gc.enable()
        os.close(err_w)
        try:
            if pid < 0:
                code = ctypes.get_errno()
                raise OSError(code, f"clone3(CLONE_INTO_CGROUP): {os.strerror(code)}")
            self.pid = pid
            self._child_created = True
            failed = os.read(err_r, 4)
        finally:
            os.close(err_r)
            pipes = ("p2cread", "p2cwrite", "c2pread", "c2pwrite", "errread", "errwrite")
            self._close_pipe_fds(*(p[name] for name in pipes))  # type: ignore[attr-defined]  # Popen's own
        if len(failed) == 4:
            os.waitpid(pid, 0)
            self.returncode = 127
            code = int.from_bytes(failed, "little")
            raise OSError(code, f"{os.strerror(code)}: {exe!r}")
