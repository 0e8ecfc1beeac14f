"""Client of the in-sandbox exec daemon over one envd stream.

The daemon is sandbox-core's exec server (:mod:`patchgym_sandbox.serve`, the same loop the
docker and k8s backends run), uploaded next to the supervisor and started once per
sandbox with a stdin pipe; a command costs one ``SendInput``
call (requests are serialised so lines never interleave) and its frames come back on the
daemon's stdout stream, demultiplexed here by request id into each command's
:class:`~patchgym_sandbox.remote.FrameDecoder`. If the daemon or its stream dies, pending
commands fail and the next command starts a new daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

from patchgym_ags.envd import EnvdProcesses, event_kind, output_of
from patchgym_sandbox.errors import InfraError
from patchgym_sandbox.remote import SUPERVISOR_PATH, FrameDecoder, server_request, server_source
from patchgym_sandbox.sandbox import ExecRequest

EXECD_PATH = "/tmp/.patchgym-execd.py"


def execd_source() -> bytes:
    """sandbox-core's exec server loop, uploaded to :data:`EXECD_PATH`."""
    return server_source()


class ExecDaemon:
    def __init__(self, procs: EnvdProcesses, python: str, user: str | None = None) -> None:
        self._procs = procs
        self._python = python
        self._user = user
        self._pid: int | None = None
        self._events: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[str, tuple[FrameDecoder, asyncio.Future[None]]] = {}
        self._send_lock = asyncio.Lock()
        self._start_lock = asyncio.Lock()
        self._stderr = bytearray()
        self._dead: BaseException | None = None

    async def _ensure(self) -> int:
        async with self._start_lock:
            if self._pid is not None and self._dead is None:
                return self._pid
            self._dead = None
            events = self._procs.start(
                [self._python, "-I", "-S", EXECD_PATH, SUPERVISOR_PATH], stdin=True, user=self._user
            )
            first = await events.__anext__()
            kind, value = event_kind(first)
            if kind != "start":
                raise InfraError(f"envd did not start the exec daemon: {first!r}")
            self._events, self._pid = events, int(value.pid)
            self._reader = asyncio.get_running_loop().create_task(self._pump(events))
            return self._pid

    async def _pump(self, events: Any) -> None:
        buf = b""
        err: BaseException | None = None
        try:
            async for resp in events:
                kind, value = event_kind(resp)
                if kind == "data":
                    field, chunk = output_of(value)
                    if field == "stderr":
                        self._stderr = (self._stderr + chunk)[-4000:]
                        continue
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        self._route(line)
                elif kind == "end":
                    err = InfraError(
                        f"the exec daemon exited (code {value.exit_code}): "
                        f"{self._stderr.decode('utf-8', 'replace')[-1000:]!r}"
                    )
                    break
        except Exception as exc:
            err = exc
        self._dead = err or InfraError("the exec daemon's stream ended")
        for _, fut in self._pending.values():
            if not fut.done():
                fut.set_exception(self._dead)
        self._pending.clear()

    def _route(self, line: bytes) -> None:
        rid, _, rest = line.partition(b" ")
        entry = self._pending.get(rid.decode("ascii", "replace"))
        if entry is None:
            return
        decoder, fut = entry
        decoder.feed(rest + b"\n")
        if decoder.finished and not fut.done():
            fut.set_result(None)

    async def run(self, req: ExecRequest, decoder: FrameDecoder) -> None:
        pid = await self._ensure()
        rid = uuid.uuid4().hex
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending[rid] = (decoder, fut)
        try:
            async with self._send_lock:
                await self._procs.send_stdin(pid, server_request(rid, req))
            await fut
        finally:
            self._pending.pop(rid, None)

    async def close(self) -> None:
        if self._pid is not None:
            with contextlib.suppress(Exception):
                await self._procs.kill(self._pid)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
        if self._events is not None:
            with contextlib.suppress(Exception):
                await self._events.aclose()
