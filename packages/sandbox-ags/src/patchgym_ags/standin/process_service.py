"""envd's ``process.Process`` service for stand-in sandboxes (Connect protocol, JSON codec)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from e2b.envd.process import process_pb as pb

from patchgym_ags.envd import oneof
from patchgym_ags.standin.procs import Event, ManagedProcess
from patchgym_ags.standin.state import Registry, StandinSandbox

KEEPALIVE_HEADER = "keepalive-ping-interval"
SANDBOX_HEADER = "e2b-sandbox-id"


def sandbox_of(registry: Registry, ctx: Any) -> StandinSandbox:
    sid = ctx.request_headers.get(SANDBOX_HEADER, "")
    sbx = registry.sandboxes.get(sid)
    if sbx is None:
        raise ConnectError(Code.UNAVAILABLE, f"The sandbox {sid} was not found")
    return sbx


def _find(sbx: StandinSandbox, selector: Any) -> ManagedProcess:
    sel = selector.selector if selector is not None else None
    if sel is not None and sel.field == "pid" and sel.value in sbx.procs:
        return sbx.procs[sel.value]
    if sel is not None and sel.field == "tag":
        for proc in sbx.procs.values():
            if proc.tag == sel.value:
                return proc
    raise ConnectError(Code.NOT_FOUND, f"process {sel.value if sel else '?'} not found")


def _event(kind: str, value: Any) -> pb.ProcessEvent:
    return pb.ProcessEvent(event=oneof(kind, value))


def _to_pb(ev: Event) -> pb.ProcessEvent:
    if ev[0] == "data":
        return _event("data", pb.ProcessEvent.DataEvent(output=oneof(ev[1], ev[2])))
    _, code, status = ev
    return _event("end", pb.ProcessEvent.EndEvent(exit_code=code, exited=True, status=status))


class ProcessService:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    async def _stream(
        self, proc: ManagedProcess, q: asyncio.Queue[Event], ctx: Any, deadline: float | None
    ) -> AsyncIterator[pb.ProcessEvent]:
        raw = ctx.request_headers.get(KEEPALIVE_HEADER)
        keepalive = float(raw) if raw else None
        try:
            while True:
                waits = [
                    w
                    for w in (keepalive, deadline - time.monotonic() if deadline else None)
                    if w is not None
                ]
                try:
                    ev = (
                        await asyncio.wait_for(q.get(), max(0.0, min(waits)))
                        if waits
                        else await q.get()
                    )
                except TimeoutError:
                    if deadline is not None and time.monotonic() >= deadline:
                        deadline = None
                        if not self.registry.config.faults.ignore_deadlines:
                            proc.kill_tree()
                        continue
                    yield _event("keepalive", pb.ProcessEvent.KeepAlive())
                    continue
                if ev[0] == "lost":
                    raise ConnectError(Code.UNAVAILABLE, ev[1])
                yield _to_pb(ev)
                if ev[0] == "end":
                    return
        finally:
            proc.unsubscribe(q)

    async def start(self, request: pb.StartRequest, ctx: Any) -> AsyncIterator[pb.StartResponse]:
        sbx = sandbox_of(self.registry, ctx)
        cfg = request.process or pb.ProcessConfig()
        cwd = sbx.paths.absolute(cfg.cwd) if cfg.has_field("cwd") and cfg.cwd else sbx.paths.workdir
        host, _ = sbx.paths.host(cwd)
        if not host.is_dir():
            raise ConnectError(Code.INVALID_ARGUMENT, f"cwd {cwd!r} does not exist")
        proc = ManagedProcess(
            cmd=cfg.cmd, args=list(cfg.args), envs=dict(cfg.envs), cwd=cwd,
            tag=request.tag if request.has_field("tag") else None, pty=request.pty is not None,
        )  # fmt: skip
        q = proc.subscribe()
        try:
            await proc.spawn(
                sbx.prefix(cwd, new_session=not proc.pty), sbx.base_env(), sbx.local.id,
                stdin=bool(request.stdin) if request.has_field("stdin") else True,
                cgroups=sbx.local.cgroup_dirs,
            )  # fmt: skip
        except OSError as exc:
            raise ConnectError(Code.INVALID_ARGUMENT, f"cannot start {cfg.cmd!r}: {exc}") from None
        sbx.procs[proc.pid] = proc
        if request.pty is not None and request.pty.size is not None:
            proc.resize(request.pty.size.cols, request.pty.size.rows)
        timeout_ms = ctx.timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms else None
        try:
            yield pb.StartResponse(event=_event("start", pb.ProcessEvent.StartEvent(pid=proc.pid)))
            async for ev in self._stream(proc, q, ctx, deadline):
                yield pb.StartResponse(event=ev)
        finally:
            if proc.result is not None:
                sbx.procs.pop(proc.pid, None)

    async def connect(
        self, request: pb.ConnectRequest, ctx: Any
    ) -> AsyncIterator[pb.ConnectResponse]:
        sbx = sandbox_of(self.registry, ctx)
        proc = _find(sbx, request.process)
        q = proc.subscribe()
        yield pb.ConnectResponse(event=_event("start", pb.ProcessEvent.StartEvent(pid=proc.pid)))
        async for ev in self._stream(proc, q, ctx, None):
            yield pb.ConnectResponse(event=ev)

    async def list(self, request: pb.ListRequest, ctx: Any) -> pb.ListResponse:
        sbx = sandbox_of(self.registry, ctx)
        infos = [
            pb.ProcessInfo(
                config=pb.ProcessConfig(cmd=p.cmd, args=p.args, envs=p.envs, cwd=p.cwd),
                pid=p.pid,
                tag=p.tag,
            )
            for p in sbx.procs.values()
            if p.result is None
        ]
        return pb.ListResponse(processes=infos)

    async def send_signal(self, request: pb.SendSignalRequest, ctx: Any) -> pb.SendSignalResponse:
        proc = _find(sandbox_of(self.registry, ctx), request.process)
        proc.signal(9 if request.signal == pb.Signal.SIGKILL else 15)
        return pb.SendSignalResponse()

    async def _input(self, proc: ManagedProcess, data: Any) -> None:
        inp = data.input if data is not None else None
        if inp is None:
            return
        try:
            await proc.write_stdin(bytes(inp.value))
        except OSError as exc:
            raise ConnectError(
                Code.FAILED_PRECONDITION, f"cannot write to process {proc.pid}: {exc}"
            ) from None

    async def send_input(self, request: pb.SendInputRequest, ctx: Any) -> pb.SendInputResponse:
        proc = _find(sandbox_of(self.registry, ctx), request.process)
        await self._input(proc, request.input)
        return pb.SendInputResponse()

    async def stream_input(
        self, request: AsyncIterator[pb.StreamInputRequest], ctx: Any
    ) -> pb.StreamInputResponse:
        sbx = sandbox_of(self.registry, ctx)
        proc: ManagedProcess | None = None
        async for msg in request:
            ev = msg.event
            if ev is None:
                continue
            if ev.field == "start":
                proc = _find(sbx, ev.value.process)
            elif ev.field == "data":
                if proc is None:
                    raise ConnectError(Code.FAILED_PRECONDITION, "data before start in StreamInput")
                await self._input(proc, ev.value.input)
        return pb.StreamInputResponse()

    async def close_stdin(self, request: pb.CloseStdinRequest, ctx: Any) -> pb.CloseStdinResponse:
        proc = _find(sandbox_of(self.registry, ctx), request.process)
        with contextlib.suppress(OSError):
            await proc.close_stdin()
        return pb.CloseStdinResponse()

    async def update(self, request: pb.UpdateRequest, ctx: Any) -> pb.UpdateResponse:
        proc = _find(sandbox_of(self.registry, ctx), request.process)
        if request.pty is not None and request.pty.size is not None:
            proc.resize(request.pty.size.cols, request.pty.size.rows)
        return pb.UpdateResponse()
