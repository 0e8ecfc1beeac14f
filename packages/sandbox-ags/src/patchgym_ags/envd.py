"""envd's ``process.Process`` service, called with the SDK's own RPC client.

``sandbox.commands.run`` always wraps a command in ``/bin/bash -l -c``: a login shell that
sources the image's profile on every call (hundreds of ms on heavy images) and may print
to the streams. The supervisor needs no shell, so we start ``python3 supervisor.py`` with
envd's ``Start`` directly, through the very client the SDK builds for its ``commands``
module (same transport, auth headers, access token and JSON codec).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from e2b import AsyncSandbox
from e2b.connection_config import KEEPALIVE_PING_HEADER, KEEPALIVE_PING_INTERVAL_SEC
from e2b.envd.client_async import create_rpc_client
from e2b.envd.process import process_connect, process_pb
from protobuf import Oneof


@dataclass
class Outcome:
    exit_code: int
    stderr: str = ""
    stdout: str = ""


def user_header(user: str | None) -> dict[str, str]:
    """envd picks the user from HTTP basic auth (``user:``); none means the image default."""
    if not user:
        return {}
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:".encode()).decode()}


def oneof(field: str, value: Any) -> Any:
    """A protobuf oneof value (typed loosely: the stubs want literal field names)."""
    return Oneof(field, value)


def _selector(pid: int) -> process_pb.ProcessSelector:
    return process_pb.ProcessSelector(selector=oneof("pid", pid))


class EnvdProcesses:
    def __init__(self, sbx: AsyncSandbox) -> None:
        self._rpc: Any = create_rpc_client(
            process_connect.ProcessClient, sbx.envd_api_url, sbx.connection_config
        )

    def start(
        self,
        argv: Sequence[str],
        *,
        user: str | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        pty: tuple[int, int] | None = None,
        stdin: bool = False,
    ) -> AsyncIterator[Any]:
        config = process_pb.ProcessConfig(
            cmd=argv[0], args=list(argv[1:]), envs=dict(env or {}), cwd=cwd
        )
        request = process_pb.StartRequest(
            process=config,
            pty=process_pb.PTY(size=process_pb.PTY.Size(cols=pty[0], rows=pty[1])) if pty else None,
            stdin=stdin or pty is not None,
        )
        headers = {**user_header(user), KEEPALIVE_PING_HEADER: str(KEEPALIVE_PING_INTERVAL_SEC)}
        events: AsyncIterator[Any] = self._rpc.start(request, headers=headers)
        return events

    async def run(
        self,
        argv: Sequence[str],
        *,
        on_stdout: Callable[[bytes], None] | None = None,
        user: str | None = None,
    ) -> Outcome:
        """Run ``argv`` (no shell) to the end; stdout goes to ``on_stdout`` or is collected."""
        out: list[bytes] = []
        err: list[bytes] = []
        code = -1
        events = self.start(argv, user=user)
        try:
            async for resp in events:
                kind, value = _event(resp)
                if kind == "data":
                    field, chunk = _output(value)
                    if field == "stdout":
                        (on_stdout or out.append)(chunk)
                    elif field == "stderr":
                        err.append(chunk)
                elif kind == "end":
                    code = value.exit_code
        finally:
            await events.aclose()  # type: ignore[attr-defined]  # the stream object's type hides its async-generator aclose
        return Outcome(
            exit_code=code,
            stdout=b"".join(out).decode("utf-8", "replace"),
            stderr=b"".join(err).decode("utf-8", "replace"),
        )

    async def send_pty(self, pid: int, data: bytes) -> None:
        await self._rpc.send_input(
            process_pb.SendInputRequest(
                process=_selector(pid), input=process_pb.ProcessInput(input=oneof("pty", data))
            )
        )

    async def send_stdin(self, pid: int, data: bytes) -> None:
        await self._rpc.send_input(
            process_pb.SendInputRequest(
                process=_selector(pid), input=process_pb.ProcessInput(input=oneof("stdin", data))
            )
        )

    async def kill(self, pid: int) -> None:
        await self._rpc.send_signal(
            process_pb.SendSignalRequest(process=_selector(pid), signal=process_pb.Signal.SIGKILL)
        )


def _event(resp: Any) -> tuple[str | None, Any]:
    ev = resp.event.event if resp.event is not None else None
    if ev is None:
        return None, None
    return ev.field, ev.value


def _output(data: Any) -> tuple[str | None, bytes]:
    out = data.output
    if out is None:
        return None, b""
    return out.field, bytes(out.value)


def event_kind(resp: Any) -> tuple[str | None, Any]:
    """``(field, value)`` of a Start/Connect response's process event."""
    return _event(resp)


def output_of(data: Any) -> tuple[str | None, bytes]:
    return _output(data)
