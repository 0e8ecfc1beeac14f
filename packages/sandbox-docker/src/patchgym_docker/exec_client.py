"""Client of the in-container exec server (``patchgym_sandbox.serve``) over one attached exec.

One connection per sandbox: requests are lines written to the exec's stdin; a daemon
thread strips the engine's stdout/stderr framing off the hijacked socket and hands stdout
to sandbox-core's :class:`~patchgym_sandbox.server_client.ServerClient`, which routes each
line to the :class:`FrameDecoder` of its request. A command costs one line each way
instead of a ``docker exec`` (a runc start) plus a Python start.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from patchgym_docker.hijack import Hijacked
from patchgym_sandbox import remote
from patchgym_sandbox.remote import FrameDecoder
from patchgym_sandbox.sandbox import ExecRequest
from patchgym_sandbox.server_client import ServerClient, ServerGone


def server_source() -> str:
    """sandbox-core's exec server loop, passed in argv (``python3 -I -S -c <source>``)."""
    return remote.server_source().decode()


class ExecServerConnection(ServerClient):
    """A started exec server; ``run(req, decoder)`` completes when its status arrives."""

    def __init__(
        self, hijacked: Any, run_blocking: Callable[[Callable[[], None]], Awaitable[None]]
    ) -> None:
        super().__init__()
        self._io = Hijacked(hijacked)
        self._run_blocking = run_blocking
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._stderr = bytearray()
        self.exec_id: str | None = None
        """The engine's id of the server's exec (to tell a killed server from a broken stream)."""
        self._reader = threading.Thread(
            target=self._read_loop, name="patchgym-docker-exec", daemon=True
        )
        self._reader.start()

    def diagnostic(self) -> str:
        return self._stderr[-2000:].decode(errors="replace")

    # -- reading -------------------------------------------------------------------
    def _read_loop(self) -> None:
        try:
            for stream, data in self._io.frames():
                if stream != 1:
                    self._stderr += data
                    del self._stderr[:-8192]
                    continue
                self._feed(data)
        except OSError:
            pass
        finally:
            self._end(self.diagnostic())

    # -- writing -------------------------------------------------------------------
    def _send(self, line: bytes) -> None:
        with self._send_lock:
            self._io.sendall(line)

    async def run(self, req: ExecRequest, decoder: FrameDecoder) -> asyncio.Future[None]:
        """Send ``req``; returns the future that completes when its status has arrived."""
        rid = str(next(self._ids))
        done = self._register(rid, decoder)
        if done is None:
            raise ServerGone(self.diagnostic())
        line = remote.server_request(rid, req)
        try:
            await self._run_blocking(lambda: self._send(line))
        except OSError as exc:
            self._end(self.diagnostic())
            raise ServerGone(str(exc)) from exc
        return done

    async def kill(self, var: str, token: str, *, foreground: bool = False) -> bool:
        """Ask the server to kill processes carrying ``var=token``; False if it is gone.
        ``foreground``: only the foreground job of the interactive shell carrying it, and
        return once it is dead (the shell's next input must not reach the dying job)."""
        if not self.alive:
            return False
        if foreground:

            async def send(line: bytes) -> None:
                await self._run_blocking(lambda: self._send(line))

            return await self._kill_foreground(f"f{next(self._ids)}", send, var, token)
        try:
            await self._run_blocking(lambda: self._send(remote.server_kill(var, token)))
        except OSError:
            return False
        return True

    def close(self) -> None:
        """Closing stdin makes the server kill what still runs and exit."""
        self.alive = False
        self._io.close()
