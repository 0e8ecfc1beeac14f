"""The driver's side of an isolated local sandbox: bubblewrap running the exec server.

:func:`launch` starts ``bwrap ... python3 -c <nsinit> <serve> <supervisor>`` (the shared
exec server loop, :mod:`patchgym_sandbox.serve`, extended by :mod:`patchgym_sandbox.nsinit`;
precompiled once per driver where the interpreter is the driver's own, see
:mod:`.bootcode`) as PID 1 of the sandbox's namespaces, in the sandbox's cgroups before
anything runs (as root the preexec places bubblewrap there before it starts; otherwise
bubblewrap blocks on ``--block-fd`` until the driver has moved the init), and waits for
``READY``.
:class:`ServerConnection` multiplexes commands and shells over its stdin/stdout, whose
replies are read on the caller's event loop (``add_reader`` on the pipe: no thread between
the pipe and the awaiting coroutine). Killing the server's PID
(:meth:`ServerConnection.kill`) ends every process in the sandbox at once.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchgym_sandbox.errors import IsolationUnavailable, SandboxLost
from patchgym_sandbox.local import bootcode, clone_into
from patchgym_sandbox.local.ownthread import spawn_in_own_thread
from patchgym_sandbox.remote import FrameDecoder, server_kill, server_request
from patchgym_sandbox.result import ExecResult
from patchgym_sandbox.sandbox import ExecRequest
from patchgym_sandbox.serve import TAG_VAR
from patchgym_sandbox.server_client import ServerClient, ServerGone, call_on
from patchgym_sandbox.session import ShellChannel

READY_TIMEOUT_S = 30.0
REAP_S = 10.0
"""How long a close waits for bubblewrap to reap the killed init and exit on its own before
it is killed too (a busy machine is slow; it takes about a millisecond)."""


@dataclass
class _Shell:
    loop: asyncio.AbstractEventLoop
    channel: ShellChannel


class ServerConnection(ServerClient):
    """The exec server over the bubblewrap process's pipes, plus its interactive shells.

    Requests are routed by :class:`~patchgym_sandbox.server_client.ServerClient` (shared
    with docker and k8s); this class adds the pipes, the shells' frames and the kill.
    """

    def __init__(self, proc: subprocess.Popen[bytes], init_pid: int, sandbox_id: str) -> None:
        super().__init__()
        self.proc = proc
        self._fd = proc.stdout.fileno()  # type: ignore[union-attr]  # spawned with stdout=PIPE
        self._reader_loop: asyncio.AbstractEventLoop | None = None
        self._reader_lock = threading.Lock()
        self.init_pid = init_pid
        """The server's PID on this machine: PID 1 of the sandbox's namespace."""
        self.sandbox_id = sandbox_id
        self._shells: dict[bytes, _Shell] = {}
        self._write_lock = threading.Lock()
        self._ids = itertools.count()
        self._dead: str | None = None

    def read_ready(self) -> bytes:
        """Blocking, before any request: the server's first line (``- READY <pid>``, or
        whatever it said instead); what came after it stays for the loop's reader."""
        buf = b""
        while b"\n" not in buf:
            chunk = os.read(self._fd, 4096)
            if not chunk:
                break
            buf += chunk
        line, _, self._partial = buf.partition(b"\n")
        os.set_blocking(self._fd, False)
        return line

    def _attach(self) -> None:
        """Read the replies on the running loop (the caller's), from now on. A loop that is
        stopped or closed gives the pipe up to the caller's; one that still runs (in another
        thread) keeps it and settles this caller's futures thread-safely."""
        loop = asyncio.get_running_loop()
        with self._reader_lock:
            current = self._reader_loop
            if current is loop or self._dead is not None:
                return
            if current is not None:
                if current.is_running():
                    return
                with contextlib.suppress(RuntimeError, ValueError, OSError):
                    current.remove_reader(self._fd)
            loop.add_reader(self._fd, self._on_readable)
            self._reader_loop = loop

    def detach(self) -> None:
        """Stop reading on the running loop (before the pipe is closed)."""
        with self._reader_lock:
            loop, self._reader_loop = self._reader_loop, None
        if loop is not None:
            with contextlib.suppress(RuntimeError, ValueError, OSError):
                loop.remove_reader(self._fd)

    def _on_readable(self) -> None:
        try:
            data = os.read(self._fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self._feed(data)
            return
        self.detach()
        self._dead = (
            f"local sandbox {self.sandbox_id} ended: its init process exited "
            "(killed from outside, out of memory, or removed by reap)"
        )
        self._end(self._dead)
        for s in list(self._shells.values()):
            call_on(s.loop, s.channel.feed, b"")

    def _send(self, line: bytes) -> None:
        """Write one whole line (ending in a newline) to the server."""
        if self._dead is not None:
            raise SandboxLost(self._dead)
        try:
            with self._write_lock:
                self.proc.stdin.write(line)  # type: ignore[union-attr]  # spawned with stdin=PIPE
                self.proc.stdin.flush()  # type: ignore[union-attr]  # spawned with stdin=PIPE
        except (OSError, ValueError) as exc:
            raise SandboxLost(f"local sandbox {self.sandbox_id} is gone: {exc}") from exc

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        for raw in out:
            self._dispatch(raw.rstrip(b"\n"))
        self._dead = (
            f"local sandbox {self.sandbox_id} ended: its init process exited "
            "(killed from outside, out of memory, or removed by reap)"
        )
        self._end(self._dead)
        for s in list(self._shells.values()):
            s.channel.feed_threadsafe(s.loop, b"")

    def _dispatch(self, line: bytes) -> None:
        rid, _, frame = line.partition(b" ")
        shell = self._shells.get(rid)
        if shell is None:
            super()._dispatch(line)
            return
        kind, _, data = frame.partition(b" ")
        if kind == b"1":
            call_on(shell.loop, shell.channel.feed, base64.b64decode(data))
        elif kind == b"E":
            call_on(shell.loop, shell.channel.feed, b"")

    def _rid(self) -> str:
        return f"r{next(self._ids)}"

    async def run(self, req: ExecRequest) -> ExecResult:
        rid = self._rid()
        decoder = FrameDecoder(req.max_output_bytes)
        self._attach()
        done = self._register(rid, decoder)
        if done is None:
            raise SandboxLost(self._dead or f"local sandbox {self.sandbox_id} is gone")
        try:
            self._send(server_request(rid, req))
            await done
        except asyncio.CancelledError:
            with contextlib.suppress(SandboxLost):
                self._send(server_kill(TAG_VAR, rid))
            raise
        except ServerGone as exc:
            raise SandboxLost(str(exc)) from None
        finally:
            self._forget(rid)
        return decoder.result()

    async def open_shell(
        self, argv: Sequence[str], cwd: str, env: Mapping[str, str]
    ) -> ShellChannel:
        self._attach()
        rid = self._rid().encode()
        chan = ServerShell(self, rid)
        self._shells[rid] = _Shell(asyncio.get_running_loop(), chan)
        spec = {"argv": list(argv), "cwd": cwd, "env": dict(env)}
        chan.send(b"S", base64.b64encode(json.dumps(spec).encode()))
        return chan

    def kill(self) -> None:
        """End the sandbox (:func:`stop`; call :meth:`detach` on the reading loop first)."""
        with contextlib.suppress(OSError):
            self.proc.stdin.close()  # type: ignore[union-attr]  # spawned with stdin=PIPE
        stop(self.proc, self.init_pid)


def stop(proc: subprocess.Popen[bytes], init_pid: int | None) -> None:
    """SIGKILL the namespace's init: the kernel kills everything else in it. Bubblewrap, the
    init's parent, then reaps it and exits; it is killed only if it has not within
    :data:`REAP_S` (or at once where no init was reported). Killed first, it would leave the
    init a zombie of this machine's PID 1, never reaped where that is a driver without a
    reaper (a trainer as a container's PID 1), each one holding a PID until the container
    runs out of them."""
    if init_pid is not None:
        with contextlib.suppress(OSError):
            os.kill(init_pid, signal.SIGKILL)
        try:
            proc.wait(REAP_S)
            return
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(OSError):
        proc.kill()
    proc.wait()


class ServerShell(ShellChannel):
    def __init__(self, conn: ServerConnection, rid: bytes) -> None:
        super().__init__()
        self._conn = conn
        self._rid = rid

    def send(self, op: bytes, arg: bytes = b"") -> None:
        """One ``<rid> <op> [<arg>]`` line of this shell to the server."""
        self._conn._send(b" ".join([self._rid, op, arg] if arg else [self._rid, op]) + b"\n")

    async def write(self, data: bytes) -> None:
        for i in range(0, len(data), 32768):
            self.send(b"W", base64.b64encode(data[i : i + 32768]))

    async def kill_foreground(self) -> None:
        with contextlib.suppress(SandboxLost):
            self.send(b"I")

    async def close(self) -> None:
        with contextlib.suppress(SandboxLost):
            self.send(b"C")
        self._conn._shells.pop(self._rid, None)


def launch(
    argv_for: Callable[[int, int | None, list[str]], list[str]],
    *,
    python: str,
    env: Mapping[str, str],
    rlimits: Mapping[str, int],
    on_init: Callable[[int], None] | None,
    sandbox_id: str,
    log: Path,
    preexec_fn: Callable[[], None] | None = None,
    around: Callable[[], AbstractContextManager[object]] | None = None,
    user: int | None = None,
    pass_fds: Sequence[int] = (),
    precompiled: bool = True,
    cgroup_dir: Path | None = None,
    born_uid: int | None = None,
) -> ServerConnection:
    """Start the sandbox. ``argv_for(info_fd, block_fd, command)`` is the whole argv running
    ``command`` (the exec server) in the sandbox, speaking bubblewrap's info/block fd
    protocol (bubblewrap itself, or :mod:`~patchgym_sandbox.local.gvisor`'s); ``on_init``
    gets the init's PID while bubblewrap waits (to place it in cgroups) before anything runs
    (None: ``preexec_fn`` placed bubblewrap there already, so nothing waits: ``block_fd``
    is None); ``preexec_fn`` runs in the child before bubblewrap (drops root, see
    ``local.rootless``). ``around``: bubblewrap is started inside this context, entered in
    a thread of its own (which stays its parent), and inherits what it did to that thread
    (its cgroups, its mount namespace: see :mod:`.ownthread`); with ``user`` (a uid, also
    the gid, no supplementary groups) instead of a ``preexec_fn`` no Python runs in the
    child.
    ``precompiled``: the server may get its code through an inherited descriptor (see
    :mod:`.bootcode`; runsc passes none on)."""
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe() if on_init is not None else (None, None)
    config = json.dumps({"rlimits": dict(rlimits)})
    command, boot_fds = bootcode.argv(python, config, precompiled=precompiled)
    argv = argv_for(info_w, block_r, command)
    blocks = (block_r,) if block_r is not None else ()
    try:
        with open(log, "wb") as err:

            def spawn() -> subprocess.Popen[bytes]:
                common: dict[str, Any] = {
                    "stdin": subprocess.PIPE,
                    "stdout": subprocess.PIPE,
                    "stderr": err,
                    "env": dict(env),
                    "pass_fds": (info_w, *blocks, *boot_fds, *pass_fds),
                    "start_new_session": True,
                }
                if cgroup_dir is not None:  # born in the group (cgroup v2), see .clone_into
                    group = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                    try:
                        return clone_into.CgroupPopen(argv, cgroup_fd=group, uid=born_uid, **common)
                    finally:
                        os.close(group)
                return subprocess.Popen(
                    argv,
                    preexec_fn=preexec_fn,
                    user=user,
                    group=user,
                    extra_groups=[] if user is not None else None,
                    **common,
                )

            if cgroup_dir is not None:  # from here, not from a thread with private mounts
                clone_into.HELPER_PROCESS.ensure()
            proc = spawn() if around is None else spawn_in_own_thread(around, spawn, "pg-bwrap")
    finally:
        for fd in (info_w, *blocks):
            os.close(fd)
    init_pid: int | None = None
    try:
        init_pid = _read_child_pid(info_r)
        if init_pid is None:
            proc.wait(READY_TIMEOUT_S)
            raise IsolationUnavailable(f"the sandbox failed to start: {_tail(log)}")
        if on_init is not None and block_w is not None:
            on_init(init_pid)
            with contextlib.suppress(BrokenPipeError):  # no --block-fd (runsc): nothing waits
                os.write(block_w, b"1")
    except BaseException:
        stop(proc, init_pid)
        raise
    finally:
        for fd in (info_r, *((block_w,) if block_w is not None else ())):
            os.close(fd)
    conn = ServerConnection(proc=proc, init_pid=init_pid, sandbox_id=sandbox_id)
    line = conn.read_ready()
    if not line.startswith(b"- READY"):
        conn.kill()
        raise IsolationUnavailable(
            f"the in-sandbox exec server did not start ({line!r}): {_tail(log)}"
        )
    return conn


def _read_child_pid(fd: int) -> int | None:
    """bubblewrap's ``--info-fd`` JSON (read until it parses: the sandbox keeps the fd)."""
    buf = b""
    while chunk := os.read(fd, 4096):
        buf += chunk
        try:
            return int(json.loads(buf)["child-pid"])
        except (ValueError, KeyError):
            continue
    return None


def _tail(log: Path) -> str:
    with contextlib.suppress(OSError):
        return log.read_text(errors="replace").strip()[-1000:]
    return "(no output)"
