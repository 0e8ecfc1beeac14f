"""A ``docker exec`` with a tty and an attached socket, as a :class:`ShellChannel`."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from patchgym_docker.hijack import Hijacked
from patchgym_sandbox.session import ShellChannel


class DockerShellChannel(ShellChannel):
    """Bytes to and from ``bash -i`` on the exec's pty; a daemon thread reads the socket."""

    def __init__(
        self,
        hijacked: Any,
        loop: asyncio.AbstractEventLoop,
        run: Callable[[Callable[[], None]], Awaitable[None]],
        on_close: Callable[[], Awaitable[None]],
        kill_foreground: Callable[[], Awaitable[None]],
    ) -> None:
        super().__init__()
        self._io = Hijacked(hijacked)
        self._loop = loop
        self._run = run
        self._on_close = on_close
        self._kill_foreground = kill_foreground
        self._closed = False
        self._reader = threading.Thread(
            target=self._read_loop, name="patchgym-docker-shell", daemon=True
        )
        self._reader.start()

    def _read_loop(self) -> None:
        try:
            while True:
                data = self._io.recv(65536)
                if not data:
                    break
                self.feed_threadsafe(self._loop, data)
        except OSError:
            pass
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            self.feed_threadsafe(self._loop, b"")

    async def write(self, data: bytes) -> None:
        await self._run(lambda: self._io.sendall(data))

    async def kill_foreground(self) -> None:
        """SIGKILL the shell's foreground job through the container's exec server."""
        await self._kill_foreground()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._on_close()
        finally:
            self._io.close()
