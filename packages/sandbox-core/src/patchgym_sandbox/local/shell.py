"""A pty running ``bash -i`` on this machine, as a :class:`ShellChannel`."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import subprocess
import termios
from collections.abc import Mapping, Sequence

from patchgym_sandbox.offload import run_blocking
from patchgym_sandbox.session import SHELL_ARGV, SHELL_ENV, ShellChannel


def _take_controlling_tty() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class PtyChannel(ShellChannel):
    def __init__(self, proc: subprocess.Popen[bytes], master: int) -> None:
        super().__init__()
        self._proc = proc
        self._master = master
        self._loop = asyncio.get_running_loop()
        os.set_blocking(master, False)
        self._loop.add_reader(master, self._on_readable)

    @classmethod
    async def spawn(
        cls, cwd: str, env: Mapping[str, str], prefix: Sequence[str] = ()
    ) -> PtyChannel:
        master, slave = os.openpty()
        try:
            proc = subprocess.Popen(
                [*prefix, *SHELL_ARGV],
                stdin=slave,
                stdout=slave,
                stderr=slave,
                cwd=cwd,
                env={**env, **SHELL_ENV},
                start_new_session=True,
                preexec_fn=_take_controlling_tty,
            )
        finally:
            os.close(slave)
        return cls(proc, master)

    def _on_readable(self) -> None:
        try:
            data = os.read(self._master, 65536)
        except BlockingIOError:
            return
        except OSError:  # EIO: the slave side closed
            data = b""
        if not data:
            self._loop.remove_reader(self._master)
        self.feed(data)

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                n = os.write(self._master, view)
            except BlockingIOError:
                await asyncio.sleep(0.005)
                continue
            view = view[n:]

    async def kill_foreground(self) -> None:
        try:
            pgid = os.tcgetpgrp(self._master)
        except OSError:
            return
        if pgid > 0 and pgid not in (self._proc.pid, _shell_pgid(self._proc.pid)):
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)

    async def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._loop.remove_reader(self._master)
        with contextlib.suppress(OSError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.close(self._master)
        await run_blocking(self._proc.wait)


def _shell_pgid(pid: int) -> int | None:
    """Process group of the interactive bash (under bwrap it is a grandchild)."""
    for _ in range(4):
        try:
            comm = open(f"/proc/{pid}/comm").read().strip()
            if comm == "bash":
                return os.getpgid(pid)
            children = open(f"/proc/{pid}/task/{pid}/children").read().split()
        except OSError:
            return None
        if not children:
            return None
        pid = int(children[0])
    return None
