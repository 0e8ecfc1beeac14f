"""Processes of one stand-in sandbox: spawned under bubblewrap, events fanned out to streams.

Every process of a sandbox shares this machine's PID namespace (so a pid written by one
command is meaningful to the next, as in a real VM) but sees the sandbox's mounts: the
working copy at the workdir, a private ``/tmp``, the rest of the filesystem read-only, and
no network unless asked. Each process starts inside the sandbox's cgroups, so the local
backend's removal kills it and everything it forked, detached or not; it also carries the
sandbox token (``PATCHGYM_SANDBOX``) and its own token for a process-tree kill.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import struct
import termios
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchgym_sandbox.local.backend import SANDBOX_TOKEN
from patchgym_sandbox.local.isolation import bwrap_path
from patchgym_sandbox.supervisor import kill_tree

PROC_TOKEN = "PATCHGYM_STANDIN_PROC"

Event = tuple[Any, ...]
"""("data", "stdout"|"stderr"|"pty", bytes) | ("end", exit_code, status) | ("lost", message)."""


SKIP_FSTYPES = frozenset(
    {"overlay", "nsfs", "proc", "sysfs", "cgroup", "cgroup2", "autofs", "fuse", "fuse.lxcfs"}
)
"""Mounts not shown inside a sandbox (other containers' roots, namespaces): bubblewrap
cannot remount some of them read-only, and a sandbox has no business seeing them."""
SKIP_PATHS = frozenset(
    {"/var/lib/docker", "/var/lib/containerd", "/run/docker", "/run/containerd", "/var/lib/kubelet"}
)
"""Container engines' state: mounts come and go there while a sandbox starts."""


def _mounts() -> dict[str, str]:
    """Mount point -> filesystem type, from this process's mountinfo."""
    out: dict[str, str] = {}
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                point = left.split()[4].replace("\\040", " ")
                out[point] = right.split()[0]
    except OSError:
        pass
    return out


def _bind_ro(path: str, mounts: dict[str, str], depth: int = 0) -> list[str]:
    """Read-only bind ops for ``path``: the whole tree at once unless mounts lie below it,
    then its children one by one, leaving out mounts of :data:`SKIP_FSTYPES`."""
    if path in SKIP_PATHS:
        return []
    if os.path.islink(path):
        return ["--symlink", os.readlink(path), path]
    below = [m for m in mounts if m.startswith(path.rstrip("/") + "/")]
    if not below or depth > 6 or not os.path.isdir(path):
        return ["--ro-bind-try", path, path]
    ops = ["--dir", path]
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return ops
    for name in names:
        child = os.path.join(path, name)
        if mounts.get(child) in SKIP_FSTYPES:
            continue
        ops += _bind_ro(child, mounts, depth + 1)
    return ops


def host_view(skip: set[str]) -> list[str]:
    """Bind ops that show this machine's filesystem read-only, except top-level ``skip``."""
    mounts = _mounts()
    ops: list[str] = []
    for name in sorted(os.listdir("/")):
        if name in skip or mounts.get("/" + name) in SKIP_FSTYPES:
            continue
        ops += _bind_ro("/" + name, mounts)
    return ops


def sandbox_argv(
    *,
    workdir: str,
    root: str,
    tmp: str,
    cwd: str,
    network: bool,
    new_session: bool,
    view: list[str],
) -> list[str]:
    """bubblewrap argv: a read-only view of this machine on a tmpfs root (so the workdir's
    mount point can be created anywhere), the working copy at ``workdir``, a private ``/tmp``."""
    argv = [bwrap_path(), "--die-with-parent", "--unshare-ipc", "--unshare-uts"]
    if not network:
        argv.append("--unshare-net")
    if new_session:
        argv.append("--new-session")
    argv += ["--tmpfs", "/", *view]
    argv += ["--dev", "/dev", "--proc", "/proc", "--bind", tmp, "/tmp", "--bind", root, workdir,
             "--remount-ro", "/", "--chdir", cwd]  # fmt: skip
    return argv


JOIN_THEN_EXEC = (
    "tty=$1; shift; "
    'while [ "$1" != -- ]; do '
    'echo $$ > "$1/cgroup.procs" || { echo "patchgym standin: cannot join $1" >&2; exit 125; }; '
    "shift; done; shift; "
    '[ -z "$tty" ] || exec 0<>"$tty"; '
    'exec "$@"'
)
"""The child's first step, as a shell that then becomes the command: join the sandbox's
cgroups (so no fork, setsid or ``env -i`` escapes the sandbox's removal), then, for a
pty, open the terminal, which makes it the controlling terminal of the new session. Not
a ``preexec_fn``: Python code between fork and exec makes a full fork of this threaded
server, and CPython 3.11's child deadlocks when another thread held the runtime's
thread-state lock at the fork (seen in CI: a thread of the child watcher exiting)."""


def _joined(argv: Sequence[str], groups: Sequence[Path], tty: str | None) -> list[str]:
    """``argv`` started through :data:`JOIN_THEN_EXEC` (the same pid: the shell execs it)."""
    return ["/bin/sh", "-c", JOIN_THEN_EXEC, "sh", tty or "", *map(str, groups), "--", *argv]


@dataclass(eq=False)
class ManagedProcess:
    cmd: str
    args: list[str]
    envs: dict[str, str]
    cwd: str
    tag: str | None
    pty: bool
    proc: asyncio.subprocess.Process | None = None
    master: int | None = None
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    subscribers: list[asyncio.Queue[Event]] = field(default_factory=list)
    result: Event | None = None
    _watch: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    def subscribe(self) -> asyncio.Queue[Event]:
        q: asyncio.Queue[Event] = asyncio.Queue()
        if self.result is not None:
            q.put_nowait(self.result)
        else:
            self.subscribers.append(q)
        return q

    def unsubscribe(self, q: asyncio.Queue[Event]) -> None:
        with contextlib.suppress(ValueError):
            self.subscribers.remove(q)

    def _emit(self, ev: Event) -> None:
        for q in self.subscribers:
            q.put_nowait(ev)

    async def spawn(
        self,
        prefix: Sequence[str],
        base_env: Mapping[str, str],
        sandbox_id: str,
        stdin: bool,
        cgroups: Sequence[Path] = (),
    ) -> None:
        env = {**base_env, **self.envs, SANDBOX_TOKEN: sandbox_id, PROC_TOKEN: self.token}
        argv = [*prefix, self.cmd, *self.args]
        if self.pty:
            master, slave = os.openpty()
            try:
                self.proc = await asyncio.create_subprocess_exec(
                    *_joined(argv, cgroups, os.ttyname(slave)),
                    stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
                )  # fmt: skip
            finally:
                os.close(slave)
            self.master = master
            os.set_blocking(master, False)
            self._watch = asyncio.get_running_loop().create_task(self._watch_pty())
        else:
            self.proc = await asyncio.create_subprocess_exec(
                *_joined(argv, cgroups, None), env=env, start_new_session=True,
                stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            self._watch = asyncio.get_running_loop().create_task(self._watch_pipes())

    async def _pump(self, stream: asyncio.StreamReader, name: str) -> None:
        while chunk := await stream.read(65536):
            self._emit(("data", name, chunk))

    async def _watch_pipes(self) -> None:
        assert self.proc is not None and self.proc.stdout and self.proc.stderr
        await asyncio.gather(
            self._pump(self.proc.stdout, "stdout"), self._pump(self.proc.stderr, "stderr")
        )
        await self._finish()

    async def _watch_pty(self) -> None:
        assert self.master is not None
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        master = self.master

        def readable() -> None:
            try:
                data = os.read(master, 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if data:
                self._emit(("data", "pty", data))
            else:
                loop.remove_reader(master)
                if not done.done():
                    done.set_result(None)

        loop.add_reader(master, readable)
        await done
        await self._finish()

    async def _finish(self) -> None:
        assert self.proc is not None
        code = await self.proc.wait()
        if code < 0:
            self.result = ("end", -1, f"signal: {signal.Signals(-code).name[3:].lower()}")
        else:
            self.result = ("end", code, f"exit status {code}")
        self._emit(self.result)
        self.subscribers.clear()
        if self.master is not None:
            with contextlib.suppress(OSError):
                os.close(self.master)
            self.master = None

    def lose(self, message: str) -> None:
        """The sandbox vanished: every open stream breaks instead of ending."""
        self._emit(("lost", message))
        self.subscribers.clear()

    # -- control ----------------------------------------------------------------
    def kill_tree(self) -> None:
        if self.proc is not None:
            kill_tree(self.proc.pid, PROC_TOKEN, self.token)

    def signal(self, sig: int) -> None:
        if sig == signal.SIGKILL:
            self.kill_tree()
        elif self.proc is not None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, sig)

    async def write_stdin(self, data: bytes) -> None:
        if self.pty and self.master is not None:
            view = memoryview(data)
            while view:
                try:
                    n = os.write(self.master, view)
                except BlockingIOError:
                    await asyncio.sleep(0.005)
                    continue
                view = view[n:]
        elif self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.write(data)
            await self.proc.stdin.drain()
        else:
            raise OSError("the process was started without stdin")

    async def close_stdin(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()

    def resize(self, cols: int, rows: int) -> None:
        if self.master is not None:
            fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
