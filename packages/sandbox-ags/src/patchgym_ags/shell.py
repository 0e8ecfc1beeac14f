"""A pty shell over envd (``Start`` with a pty, ``SendInput`` for keystrokes)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Mapping
from typing import Any

from patchgym_ags.envd import EnvdProcesses, event_kind, output_of
from patchgym_sandbox.errors import SessionError
from patchgym_sandbox.remote import SUPERVISOR_PATH, kill_foreground_argv
from patchgym_sandbox.session import SHELL_ARGV, SHELL_ENV, ShellChannel

PTY_SIZE = (200, 50)


TOKEN_VAR = "PATCHGYM_SHELL"
"""Carried by the shell and its jobs: how the foreground kill finds them."""


class EnvdPtyChannel(ShellChannel):
    def __init__(
        self, procs: EnvdProcesses, events: Any, pid: int, token: str, python: str
    ) -> None:
        super().__init__()
        self._procs = procs
        self._events = events
        self.pid = pid
        self._token = token
        self._python = python
        self._reader = asyncio.get_running_loop().create_task(self._pump())

    @classmethod
    async def open(
        cls, procs: EnvdProcesses, cwd: str, env: Mapping[str, str], *, python: str = "python3"
    ) -> EnvdPtyChannel:
        token = uuid.uuid4().hex
        env = {**env, **SHELL_ENV, TOKEN_VAR: token}
        events = procs.start(SHELL_ARGV, cwd=cwd, env=env, pty=PTY_SIZE)
        first = await events.__anext__()
        kind, value = event_kind(first)
        if kind != "start":
            raise SessionError(f"envd did not start the shell: {first!r}")
        return cls(procs, events, int(value.pid), token, python)

    async def kill_foreground(self) -> None:
        """SIGKILL the shell's foreground job: one supervisor run through envd (the
        sandbox's own process server), which finds the shell by its token."""
        argv = kill_foreground_argv(self._python, SUPERVISOR_PATH, TOKEN_VAR, self._token)
        with contextlib.suppress(Exception):
            await self._procs.run(argv)

    async def _pump(self) -> None:
        try:
            async for resp in self._events:
                kind, value = event_kind(resp)
                if kind == "data":
                    _, chunk = output_of(value)
                    if chunk:
                        self.feed(chunk)
                elif kind == "end":
                    break
        except Exception:
            pass
        finally:
            self.feed(b"")

    async def write(self, data: bytes) -> None:
        await self._procs.send_pty(self.pid, data)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._procs.kill(self.pid)
        self._reader.cancel()
        with contextlib.suppress(BaseException):
            await self._reader
        with contextlib.suppress(Exception):
            await self._events.aclose()
