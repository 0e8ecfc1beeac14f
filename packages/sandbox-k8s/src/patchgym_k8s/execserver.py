"""sandbox-core's exec server inside the pod, over one long-lived exec stream.

The server (:mod:`patchgym_sandbox.serve`) is started once per sandbox with
``python3 -I -S -c <server source> <supervisor source>`` through one exec websocket with
stdin open; each command is then one request line on that stream's stdin and its
tagged frames come back on stdout, instead of a websocket upgrade, a kubelet exec and a
Python start per command. One dedicated thread owns the websocket (reads and writes
never race on the TLS socket); requests are queued and wake it through a pipe. The
server's replies are routed to their requests by sandbox-core's
:class:`~patchgym_sandbox.server_client.ServerClient`, as for the docker backend.
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
from patchgym_sandbox.server_client import ServerClient, ServerGone


def server_argv(python: str) -> list[str]:
    return [
        python,
        "-I",
        "-S",
        "-c",
        remote.server_source().decode(),
        remote.supervisor_source().decode(),
    ]


class ExecServer(ServerClient):
    """A started in-pod exec server; ``run(req, decoder)`` returns a future for its status."""

    def __init__(self, ws: ExecStream, name: str) -> None:
        super().__init__()
        self._ws = ws
        self._outbox: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._stderr = CappedBuffer(4096)
        self._stop = False
        self.exit_code: int | None = None
        """The server process's exit code once the kubelet reported one (it exited, e.g.
        killed from inside); None while it runs or when the stream broke without a status."""
        self._thread = threading.Thread(target=self._pump, name=f"patchgym-k8s-exec-{name}")
        self._thread.daemon = True
        self._thread.start()

    def diagnostic(self) -> str:
        return self._stderr.text()[-2000:]

    # -- the stream's own thread -------------------------------------------------------
    def _pump(self) -> None:
        ws = self._ws
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
                        self._feed(payload)
        except Exception as exc:  # a broken stream ends the server; pending commands fail
            self._stderr.write(f"\n[stream error: {exc!r}]".encode())
        finally:
            self.exit_code = ws.exit_status().code
            ws.close()
            self._end(self.diagnostic() or "the exec stream ended")

    # -- callers (the event loop) ------------------------------------------------------
    def _post(self, line: bytes) -> None:
        self._outbox.put(line)
        os.write(self._wake_w, b"x")

    def run(self, req: ExecRequest, decoder: FrameDecoder) -> tuple[str, asyncio.Future[None]]:
        """Queue ``req``; returns its request id (the kill token) and the status future."""
        rid = uuid.uuid4().hex
        done = self._register(rid, decoder)
        if done is None:
            raise ServerGone(self.diagnostic() or "the exec server is gone")
        self._post(remote.server_request(rid, req))
        return rid, done

    def kill(self, rid: str) -> bool:
        """Kill every process of request ``rid``; False when the server is gone."""
        if not self.alive:
            return False
        with contextlib.suppress(OSError):
            self._post(remote.server_kill(TAG_VAR, rid))
            return True
        return False

    async def kill_foreground(self, var: str, token: str) -> bool:
        """Kill the foreground job of the interactive shell carrying ``var=token`` and
        return once it is dead; False when the server is gone or did not answer."""
        if not self.alive:
            return False

        async def send(line: bytes) -> None:
            self._post(line)

        return await self._kill_foreground(f"f{uuid.uuid4().hex}", send, var, token)

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
