# patchgym clone3 helper
# ruff: noqa: UP031, UP035
"""The single-threaded process that starts children straight into a cgroup v2 group.

Run as ``python3 -I -S clone_helper.py <socket fd>`` by :mod:`.clone_into` (stdlib only).
Each request on the ``SOCK_SEQPACKET`` socket is one JSON message with descriptors
(``SCM_RIGHTS``): the group's directory, the mount namespace to enter, then the
child's descriptors in the order of ``"fds"`` (the numbers they take in the child). The
child is made by ``clone3(CLONE_INTO_CGROUP | CLONE_PARENT)``: born in the group, and a
child of the process that asked (which waits for it as for any child of its own). The
answer is ``{"pid": N}`` once it ran ``execve``, or ``{"errno": E, "what": ...}`` (a child
that got as far as its clone then exits 127 and is still the asker's to reap).

The child of a clone runs Python until its ``execve``: that is safe here, and only here,
because this process has one thread (in a threaded interpreter another thread may hold, or
have asked for, the interpreter's lock at the clone, and the child waits for it forever).
"""

import ctypes
import json
import os
import signal
import socket
import struct
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List  # noqa: F401 (type comments)

SYS_CLONE3, SYS_SETNS = 435, {"x86_64": 308, "aarch64": 268}
CLONE_INTO_CGROUP, CLONE_PARENT, CLONE_NEWNS = 0x200000000, 0x8000, 0x20000
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long


class CloneArgs(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "flags", "pidfd", "child_tid", "parent_tid", "exit_signal", "stack",
            "stack_size", "tls", "set_tid", "set_tid_size", "cgroup",
        )
    ]  # fmt: skip


def child(req, mnt, sources, err_w):
    # type: (Dict[str, Any], int, List[int], int) -> None
    """In the clone: enter the mount namespace, put each descriptor at its number (every
    other one closes at the exec), a session, the uid, default signals, then ``execve``."""
    machine = os.uname().machine
    err_high = -1
    try:
        if LIBC.syscall(SYS_SETNS[machine], mnt, CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "setns")
        targets = req["fds"]
        floor = max(targets + sources + [err_w, 2]) + 1
        err_high = _above(err_w, floor)
        high = [_above(fd, floor) for fd in sources]
        for fd, target in zip(high, targets, strict=True):
            os.dup2(fd, target, inheritable=True)
        keep = set(targets) | {err_high}
        for name in os.listdir("/proc/self/fd"):
            if int(name) not in keep:
                try:
                    os.set_inheritable(int(name), False)
                except OSError:
                    pass
        if req["session"]:
            os.setsid()
        uid = req["uid"]
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        if req["signals"]:
            for sig in (signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
        env = dict(kv.split("=", 1) for kv in req["env"])
        os.execve(req["exe"], req["argv"], env)
    except OSError as exc:
        os.write(err_high if err_high >= 0 else err_w, struct.pack("i", exc.errno or 5))
    os._exit(127)


def _above(fd, floor):
    # type: (int, int) -> int
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor)


def spawn(req, fds):
    # type: (Dict[str, Any], List[int]) -> Dict[str, Any]
    group, mnt, rest = fds[0], fds[1], fds[2:]
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    args = CloneArgs(flags=CLONE_INTO_CGROUP | CLONE_PARENT, exit_signal=0, cgroup=group)
    try:
        pid = LIBC.syscall(SYS_CLONE3, ctypes.byref(args), ctypes.sizeof(args))
        if pid == 0:
            child(req, mnt, rest, err_w)
        if pid < 0:
            code = ctypes.get_errno()
            return {"errno": code, "what": "clone3(CLONE_INTO_CGROUP): " + os.strerror(code)}
        os.close(err_w)
        err_w = -1
        failed = os.read(err_r, 4)
    finally:
        os.close(err_r)
        if err_w >= 0:
            os.close(err_w)
    if len(failed) == 4:
        code = struct.unpack("i", failed)[0]
        return {"errno": code, "what": os.strerror(code), "pid": pid}
    return {"pid": pid}


def main():
    # type: () -> None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=int(sys.argv[1]))
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 1 << 22, 256)
        except OSError:
            return
        if not msg:
            return
        try:
            reply = spawn(json.loads(msg), fds)
        except Exception as exc:  # a bad request must not end the helper
            reply = {"errno": 22, "what": "clone helper: %r" % (exc,)}
        finally:
            for fd in fds:
                os.close(fd)
        sock.send(json.dumps(reply).encode())


if __name__ == "__main__":
    main()
