"""sandbox-core's exec server inside the pod, over one long-lived exec stream.

The server (:mod:`patchgym_sandbox.serve`) is started once per sandbox with
``python3 -I -S -c <server source> <supervisor source>`` through one exec websocket with
stdin open; each command is then one request line on that stream's stdin and its
tagged frames come back on stdout, instead of a websocket upgrade, a kubelet exec and a
Python start per command. One dedicated thread owns the websocket (reads and writes
never race on the TLS socket); requests are queued and wake it through a pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import select
import threading
import uuid

from patchgym_k8s.execstream import ExecStream
from patchgym_sandbox import remote
from patchgym_sandbox.output import CappedBuffer
from patchgym_sandbox.remote import FrameDecoder
from patchgym_sandbox.sandbox import ExecRequest
from patchgym_sandbox.serve import TAG_VAR


class ServerGone(Exception):
    """The exec server's stream ended (pod gone, server killed, stream broken)."""


def server_argv(python: str) -> list[str]:
    return [
        python,
        "-I",
        "-S",
        "-c",
        remote.server_source().decode(),
        remote.supervisor_source().decode(),
    ]


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


class ExecServer:
    """A started in-pod exec server; ``run(req, decoder)`` returns a future for its status."""

    def __init__(self, ws: ExecStream, name: str) -> None:
        self._ws = ws
        self._pending: dict[bytes, _Pending] = {}
        self._lock = threading.Lock()
        self._outbox: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._ready = threading.Event()
        self._stderr = CappedBuffer(4096)
        self._stop = False
        self.alive = True
        self.exit_code: int | None = None
        """The server process's exit code once the kubelet reported one (it exited, e.g.
        killed from inside); None while it runs or when the stream broke without a status."""
        self._thread = threading.Thread(target=self._pump, name=f"patchgym-k8s-exec-{name}")
        self._thread.daemon = True
        self._thread.start()

    def wait_ready(self, timeout: float) -> bool:
        """Blocking: True once the server said READY, False if it died or timed out first."""
        return self._ready.wait(timeout) and self.alive

    def diagnostic(self) -> str:
        return self._stderr.text()[-2000:]

    # -- the stream's own thread -------------------------------------------------------
    def _pump(self) -> None:
        ws = self._ws
        partial = b""
        try:
            while not self._stop:
                if ws.pending():
                    ready = [ws.fileno()]
                else:
                    ready, _, _ = select.select([ws.fileno(), self._wake_r], [], [], 5.0)
                if self._wake_r in ready:
                    with contextlib.suppress(OSError):
                        os.read(self._wake_r, 4096)
                    while True:
                        try:
                            ws.send(0, self._outbox.get_nowait())
                        except queue.Empty:
                            break
                if ws.fileno() in ready:
                    frame = ws.recv()
                    if frame is None:
                        break
                    channel, payload = frame
                    if channel == 2:
                        self._stderr.write(payload)
                    elif channel == 1 and payload:
                        *lines, partial = (partial + payload).split(b"\n")
                        for line in lines:
                            self._dispatch(line)
        except Exception as exc:  # a broken stream ends the server; pending commands fail
            self._stderr.write(f"\n[stream error: {exc!r}]".encode())
        finally:
            self.exit_code = ws.exit_status().code
            ws.close()
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
                entry.loop.call_soon_threadsafe(
                    _settle, entry.done, ServerGone(self.diagnostic() or "the exec stream ended")
                )

    # -- callers (the event loop) ------------------------------------------------------
    def _post(self, line: bytes) -> None:
        self._outbox.put(line)
        os.write(self._wake_w, b"x")

    def run(self, req: ExecRequest, decoder: FrameDecoder) -> tuple[str, asyncio.Future[None]]:
        """Queue ``req``; returns its request id (the kill token) and the status future."""
        rid = uuid.uuid4().hex
        entry = _Pending(decoder, asyncio.get_running_loop())
        with self._lock:
            if not self.alive:
                raise ServerGone(self.diagnostic() or "the exec server is gone")
            self._pending[rid.encode()] = entry
        self._post(remote.server_request(rid, req))
        return rid, entry.done

    def kill(self, rid: str) -> bool:
        """Kill every process of request ``rid``; False when the server is gone."""
        if not self.alive:
            return False
        with contextlib.suppress(OSError):
            self._post(remote.server_kill(TAG_VAR, rid))
            return True
        return False

    def close(self) -> None:
        """End the stream: the server sees EOF, kills what still runs and exits."""
        if self._stop:
            return
        self._stop = True
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        self._thread.join(5.0)
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
