"""Client side of the in-sandbox exec server (:mod:`patchgym_sandbox.serve`), any transport.

The docker and k8s backends reach the same server loop through different byte streams (a
hijacked ``docker exec`` socket, a websocket exec stream), each read by its own thread.
What happens to the server's stdout once it arrives is the same for both, so it lives
here: :class:`ServerClient` splits it into ``<rid> <frame>`` lines, notes ``READY`` and
routes each frame to the :class:`~patchgym_sandbox.remote.FrameDecoder` of its request;
:class:`ServerSlot` is the per-sandbox start/restart policy around one such client.
The backends keep what differs: the stream, how a line is sent, request ids, kills, stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from patchgym_sandbox.remote import FrameDecoder, server_kill_foreground

KILL_ANSWER_S = 60.0
"""How long a foreground kill waits for the server's answer (a busy machine is slow)."""


class ServerGone(Exception):
    """The exec server's stream ended (sandbox gone, server killed, stream broken)."""


class _Pending:
    __slots__ = ("decoder", "done", "loop")

    def __init__(self, decoder: FrameDecoder, loop: asyncio.AbstractEventLoop) -> None:
        self.decoder = decoder
        self.loop = loop
        self.done: asyncio.Future[None] = loop.create_future()


def call_on(loop: asyncio.AbstractEventLoop, fn: Callable[..., object], *args: object) -> None:
    """``fn(*args)`` on ``loop``: right away when that loop is running this code (a reader
    on the loop itself), else scheduled thread-safely (a reader thread, another loop)."""
    try:
        here = asyncio.get_running_loop()
    except RuntimeError:
        here = None
    if here is loop:
        fn(*args)
    else:
        loop.call_soon_threadsafe(fn, *args)


def _settle(fut: asyncio.Future[None], exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is None:
        fut.set_result(None)
    else:
        fut.set_exception(exc)


class ServerClient:
    """Demultiplexes one exec server's replies; a backend subclass owns the stream.

    The subclass's reader (a thread, or a callback on an event loop) passes the server's
    stdout to :meth:`_feed` and calls :meth:`_end` when the stream ends; callers on an event
    loop :meth:`_register` a request before sending its line. Request futures are settled
    on their own loop: directly by a reader on that loop, thread-safely from anywhere else.
    """

    def __init__(self) -> None:
        self._pending: dict[bytes, _Pending] = {}
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._partial = b""
        self.alive = True

    def wait_ready(self, timeout: float) -> bool:
        """Blocking: True once the server said READY, False if it died or timed out first."""
        return self._ready.wait(timeout) and self.alive

    # -- the reader ----------------------------------------------------------------------
    def _feed(self, data: bytes) -> None:
        """Bytes of the server's stdout, in order, split anywhere (the reader only)."""
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            self._dispatch(line)

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
            call_on(entry.loop, _settle, entry.done, None)

    def _end(self, why: str) -> None:
        """The stream ended: every pending request fails with ``ServerGone(why)``."""
        with self._lock:
            self.alive = False
            pending, self._pending = self._pending, {}
        self._ready.set()
        for entry in pending.values():
            with contextlib.suppress(RuntimeError):  # loop closed
                call_on(entry.loop, _settle, entry.done, ServerGone(why))

    # -- callers (the event loop) ------------------------------------------------------
    def _register(self, rid: str, decoder: FrameDecoder) -> asyncio.Future[None] | None:
        """The future ``rid``'s status will complete; None (nothing registered) once gone."""
        entry = _Pending(decoder, asyncio.get_running_loop())
        with self._lock:
            if not self.alive:
                return None
            self._pending[rid.encode()] = entry
        return entry.done

    async def _kill_foreground(
        self, rid: str, send: Callable[[bytes], Awaitable[None]], var: str, token: str
    ) -> bool:
        """Send the ``F`` line through ``send`` and wait for its answer (the job is dead
        then), at most :data:`KILL_ANSWER_S`; False when the server is gone or silent."""
        done = self._register(rid, FrameDecoder(4096))
        if done is None:
            return False
        try:
            await send(server_kill_foreground(rid, var, token))
            await asyncio.wait_for(done, KILL_ANSWER_S)
        except (OSError, ServerGone, TimeoutError):
            return False
        finally:
            self._forget(rid)
        return True

    def _forget(self, rid: str) -> None:
        """Drop ``rid``'s entry (its caller gave up): a late reply is then ignored."""
        with self._lock:
            self._pending.pop(rid.encode(), None)


C = TypeVar("C", bound=ServerClient)


class ServerSlot(Generic[C]):
    """A sandbox's exec server: started on first use, restarted when it died, at most
    ``max_starts`` times; past that, or once a start found it cannot run there, :meth:`get`
    says None and the backend runs one native exec per command instead."""

    def __init__(self, max_starts: int) -> None:
        self._max_starts = max_starts
        self._starts = 0
        self._lock = asyncio.Lock()
        self.current: C | None = None
        """The last server started (alive or not); None before the first or after close."""

    async def get(self, start: Callable[[], Awaitable[C | None]]) -> C | None:
        """A live server, from ``start()`` if needed (None from it: stop trying)."""
        if self.current is not None and self.current.alive:
            return self.current
        async with self._lock:
            if self.current is not None and self.current.alive:
                return self.current
            if self._starts >= self._max_starts:
                return None
            self._starts += 1
            server = await start()
            if server is None:
                self._starts = self._max_starts  # it cannot run here: stop trying
                return None
            self.current = server
            return server

    def take(self) -> C | None:
        """Forget the server (the sandbox closes) and hand it over to be closed."""
        server, self.current = self.current, None
        return server
