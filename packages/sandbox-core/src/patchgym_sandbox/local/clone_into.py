"""Start a program straight into a cgroup v2 group: ``clone3(CLONE_INTO_CGROUP)``.

Writing a PID to ``cgroup.procs`` after the start takes the kernel's global threadgroup
lock and, unless the hierarchy is mounted with ``favordynmods``, waits for an RCU grace
period (tens of ms, one create at a time). A child born in its group takes that lock only
for reading.

Python has no ``clone3``, and the driver cannot make the call itself: its child, a copy
of a threaded interpreter, would run Python until its ``execve``, and where another
thread had asked for the interpreter's lock during the clone (a driver starting sandboxes
from many threads), the child's first bytecode hands the lock over and waits forever for
a thread that does not exist in it (``drop_gil``; reproduced by
``tests/test_clone_into.py::test_spawns_while_threads_want_the_interpreter_lock``). So
one single-threaded helper per driver process (``clone_helper.py``, started on first use)
makes the call: :class:`CgroupPopen` sends it the program, its environment, its
descriptors (``SCM_RIGHTS``), the group and the mount namespace of the calling thread;
the helper clones with ``CLONE_PARENT``, so the child is the driver's own (``wait``,
``kill`` and ``returncode`` work as for any ``Popen``), and answers with its PID once the
child ran ``execve``.

``CLONE_PARENT`` makes the child's parent the *thread* that started the helper, and a
parent-death signal (bubblewrap's ``--die-with-parent``) fires when that thread ends. So
the helper is started by a thread of its own that lives as long as the process
(:class:`_Owner`), never by a pool thread: a loop's default executor ends its threads with
``asyncio.run``, and every sandbox started through a helper that such a thread had
started died with it (``tests/test_local_reap.py``, in the cgroup v2 guest).

Needs Linux >= 5.7 (``CLONE_INTO_CGROUP``) on x86-64 or arm64; :func:`supported` says
whether to use it.
"""

from __future__ import annotations

import atexit
import inspect
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

HELPER = Path(__file__).with_name("clone_helper.py")
MACHINES = ("x86_64", "aarch64")
_PARAMS = list(inspect.signature(subprocess.Popen._execute_child).parameters)[1:]  # type: ignore[attr-defined]  # private, POSIX only


def supported() -> bool:
    """A kernel and machine this module can start children on."""
    release = os.uname().release.split("-")[0].split(".")
    try:
        version = (int(release[0]), int(release[1]))
    except (IndexError, ValueError):
        return False
    return version >= (5, 7) and os.uname().machine in MACHINES


class _Owner:
    """One thread per process that starts every clone helper and never ends (a daemon:
    it goes with the process), so the helper's children keep a living parent thread.
    :meth:`popen` runs ``subprocess.Popen`` there and returns the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._pid = 0
        """The process whose thread it is (a forked child has none: it starts its own)."""

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._pid != os.getpid():
                self._jobs = queue.SimpleQueue()
                threading.Thread(target=self._serve, args=(self._jobs,), name="pg-clone-owner",
                                 daemon=True).start()  # fmt: skip
                self._pid = os.getpid()
            done: Future[subprocess.Popen[bytes]] = Future()
            self._jobs.put((lambda: subprocess.Popen(*args, **kwargs), done))
        return done.result()

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]]) -> None:
        while True:
            job, done = jobs.get()
            try:
                done.set_result(job())
            except BaseException as exc:
                done.set_exception(exc)


_OWNER = _Owner()


class _Helper:
    """The clone helper of this process: started on first use (and again if it died);
    one request at a time (a clone of the small helper takes well under a millisecond)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid = 0
        """The process the helper serves (a forked child of the driver starts its own)."""
        atexit.register(self.close)

    def ensure(self) -> None:
        """Start the helper now (from a thread in the driver's own mount namespace: a
        thread's private staging mounts must not live on in the helper)."""
        with self._lock:
            self._start()

    def _start(self) -> socket.socket:
        mine_now = self._pid == os.getpid()
        if mine_now and self._sock is not None and self._proc and self._proc.poll() is None:
            return self._sock
        self._stop()  # a dead helper's socket, or a fork's copy of its parent's
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = _OWNER.popen(
                [sys.executable, "-I", "-S", str(HELPER), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        finally:
            theirs.close()
        self._sock, self._pid = mine, os.getpid()
        return mine

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        """Close this process's socket to the helper (the helper exits at its end) and
        reap the helper, where it is this process's child (a fork's copy only closes)."""
        sock, proc, self._sock, self._proc = self._sock, self._proc, None, None
        if sock is not None:
            sock.close()
        if proc is None or self._pid != os.getpid():
            return
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def spawn(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        with self._lock:
            sock = self._start()
            try:
                socket.send_fds(sock, [json.dumps(request).encode()], fds)
                reply = sock.recv(1 << 16)
            except OSError as exc:
                reply = b""
                why = str(exc)
            else:
                why = "it ended"
            if not reply:
                self._stop()
                raise OSError(f"the clone helper did not answer ({why})")
        answer: dict[str, Any] = json.loads(reply)
        return answer


HELPER_PROCESS = _Helper()


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


class CgroupPopen(subprocess.Popen):  # type: ignore[type-arg]
    """``Popen`` whose child starts in the cgroup v2 group open at ``cgroup_fd``.

    Supports what :func:`patchgym_sandbox.local.server.launch` uses: an argv list, ``env``,
    ``stdin``/``stdout``/``stderr`` (pipes or descriptors), ``pass_fds``,
    ``start_new_session``; not ``preexec_fn``, ``cwd``, ``user``/``group``, ``shell`` or
    text mode. ``uid``: the child drops to that uid and gid, with no supplementary groups,
    before its exec (the helper stays root, which ``CLONE_INTO_CGROUP`` needs to write the
    group). The child enters the mount namespace of the calling thread (its private
    staging mounts, :mod:`.rootless`)."""

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
        env = p["env"] if p["env"] is not None else os.environ
        exe = os.fsdecode(p["executable"] or p["args"][0])
        if os.sep not in exe:
            found = shutil.which(exe, path=env.get("PATH", os.defpath))
            if found is None:
                raise FileNotFoundError(2, f"No such file or directory: {exe!r}")
            exe = found
        moves = [(p["p2cread"], 0), (p["c2pwrite"], 1), (p["errwrite"], 2)]
        # what is not redirected is this process's own, as a Popen child inherits it
        moves = [(src if src != -1 else dst, dst) for src, dst in moves]
        moves = [(src, dst) for src, dst in moves if src != dst or _is_open(src)]
        moves += [(fd, fd) for fd in p["pass_fds"]]
        mnt = os.open("/proc/thread-self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        request = {
            "exe": exe,
            "argv": [os.fsdecode(a) for a in p["args"]],
            "env": [f"{os.fsdecode(k)}={os.fsdecode(v)}" for k, v in env.items()],
            "fds": [dst for _, dst in moves],
            "session": bool(p["start_new_session"]),
            "signals": bool(p["restore_signals"]),
            "uid": self._identity,
        }
        try:
            answer = HELPER_PROCESS.spawn(request, [self._cgroup_fd, mnt, *(s for s, _ in moves)])
        finally:
            os.close(mnt)
            pipes = ("p2cread", "p2cwrite", "c2pread", "c2pwrite", "errread", "errwrite")
            self._close_pipe_fds(*(p[name] for name in pipes))  # type: ignore[attr-defined]  # Popen's own
        if "pid" in answer:
            self.pid = answer["pid"]
            self._child_created = True
        if "errno" in answer:
            if "pid" in answer:  # it exits 127 before its exec: reap it here
                os.waitpid(answer["pid"], 0)
                self.returncode = 127
            code = int(answer["errno"])
            raise OSError(code, f"{answer.get('what') or os.strerror(code)}: {exe!r}")
