"""Client of the in-container exec server (``patchgym_sandbox.serve``) over one attached exec.

One connection per sandbox: requests are lines written to the exec's stdin; a daemon
thread demultiplexes the engine's stdout/stderr frames, splits lines and routes each to
the :class:`FrameDecoder` of its request. A command costs one line each way instead of a
``docker exec`` (a runc start) plus a Python start.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import struct
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from patchgym_docker.shell import raw_socket
from patchgym_sandbox import remote
from patchgym_sandbox.remote import FrameDecoder
from patchgym_sandbox.sandbox import ExecRequest


class ServerGone(Exception):
    """The exec server's stream ended (container gone, server killed, engine restarted)."""


def server_source() -> str:
    """sandbox-core's exec server loop, passed in argv (``python3 -I -S -c <source>``)."""
    return remote.server_source().decode()


class _Pending:
    __slots__ = ("decoder", "done", "loop")

    def __init__(self, decoder: FrameDecoder, loop: asyncio.AbstractEventLoop) -> None:
        self.decoder = decoder
        self.loop = loop
        self.done: asyncio.Future[None] = loop.create_future()


def _settle(fut: asyncio.Future[None], exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is None:
        fut.set_result(None)
    else:
        fut.set_exception(exc)


class ExecServerConnection:
    """A started exec server; ``run(req, decoder)`` completes when its status arrives."""

    def __init__(
        self, hijacked: Any, run_blocking: Callable[[Callable[[], None]], Awaitable[None]]
    ) -> None:
        self._hijacked = hijacked
        self._sock = raw_socket(hijacked)
        self._sock.settimeout(None)
        self._run_blocking = run_blocking
        self._pending: dict[bytes, _Pending] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._ready = threading.Event()
        self._stderr = bytearray()
        self.alive = True
        self.exec_id: str | None = None
        """The engine's id of the server's exec (to tell a killed server from a broken stream)."""
        self._reader = threading.Thread(
            target=self._read_loop, name="patchgym-docker-exec", daemon=True
        )
        self._reader.start()

    def wait_ready(self, timeout: float) -> bool:
        """Blocking: True once the server said READY, False if it died or timed out first."""
        return self._ready.wait(timeout) and self.alive

    def diagnostic(self) -> str:
        return self._stderr[-2000:].decode(errors="replace")

    # -- reading -------------------------------------------------------------------
    def _read_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self._sock.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return bytes(buf)

    def _read_loop(self) -> None:
        pending_line = b""
        try:
            while True:
                stream, size = struct.unpack(">BxxxL", self._read_exactly(8))
                data = self._read_exactly(size)
                if stream != 1:
                    self._stderr += data
                    del self._stderr[:-8192]
                    continue
                *lines, pending_line = (pending_line + data).split(b"\n")
                for line in lines:
                    self._dispatch(line)
        except (EOFError, OSError):
            pass
        finally:
            self._die()

    def _dispatch(self, line: bytes) -> None:
        rid, _, frame = line.partition(b" ")
        if rid == b"-":
            self._ready.set()
            return
        with self._lock:
            entry = self._pending.get(rid)
            if entry is not None and frame.startswith(b"X "):
                del self._pending[rid]
        if entry is None:
            return
        entry.decoder.feed(frame + b"\n")
        if frame.startswith(b"X "):
            entry.loop.call_soon_threadsafe(_settle, entry.done, None)

    def _die(self) -> None:
        with self._lock:
            self.alive = False
            pending, self._pending = self._pending, {}
        self._ready.set()
        for entry in pending.values():
            with contextlib.suppress(RuntimeError):  # loop closed
                entry.loop.call_soon_threadsafe(_settle, entry.done, ServerGone(self.diagnostic()))

    # -- writing -------------------------------------------------------------------
    def _send(self, line: bytes) -> None:
        with self._send_lock:
            self._sock.sendall(line)

    async def run(self, req: ExecRequest, decoder: FrameDecoder) -> asyncio.Future[None]:
        """Send ``req``; returns the future that completes when its status has arrived."""
        rid = str(next(self._ids)).encode()
        entry = _Pending(decoder, asyncio.get_running_loop())
        with self._lock:
            if not self.alive:
                raise ServerGone(self.diagnostic())
            self._pending[rid] = entry
        line = remote.server_request(rid.decode(), req)
        try:
            await self._run_blocking(lambda: self._send(line))
        except OSError as exc:
            self._die()
            raise ServerGone(str(exc)) from exc
        return entry.done

    async def kill(self, var: str, token: str) -> bool:
        """Ask the server to kill processes carrying ``var=token``; False if it is gone."""
        if not self.alive:
            return False
        try:
            await self._run_blocking(lambda: self._send(remote.server_kill(var, token)))
        except OSError:
            return False
        return True

    def close(self) -> None:
        """Closing stdin makes the server kill what still runs and exit."""
        self.alive = False
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._hijacked.close()
