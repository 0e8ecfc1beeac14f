"""The transport-agnostic exec server client (``patchgym_sandbox.server_client``).

Driven against the real server loop over a plain pipe, the simplest transport: what the
docker and k8s backends add is only their stream, so this is the routing they share.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchgym_sandbox.remote import FrameDecoder, server_request, server_source, supervisor_source
from patchgym_sandbox.sandbox import ExecRequest
from patchgym_sandbox.server_client import ServerClient, ServerGone, ServerSlot


def request(cmd: str) -> ExecRequest:
    return ExecRequest(
        cmd=cmd,
        timeout=30.0,
        idle_timeout=None,
        cwd="/",
        env={},
        stdin=None,
        user=None,
        max_output_bytes=1 << 20,
    )


class PipeClient(ServerClient):
    """The server as a subprocess; its stdout read in small, line-splitting chunks."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__()
        (tmp_path / "serve.py").write_bytes(server_source())
        (tmp_path / "sup.py").write_bytes(supervisor_source())
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(tmp_path / "serve.py"), str(tmp_path / "sup.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self._rids = iter(range(1, 1000))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while chunk := os.read(fd, 7):  # lines split mid-frame on purpose
            self._feed(chunk)
        self._end("the pipe closed")

    def run(self, req: ExecRequest, decoder: FrameDecoder) -> asyncio.Future[None]:
        rid = f"r{next(self._rids)}"
        done = self._register(rid, decoder)
        if done is None:
            raise ServerGone("gone")
        assert self.proc.stdin is not None
        self.proc.stdin.write(server_request(rid, req))
        self.proc.stdin.flush()
        return done

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def client(tmp_path: Path) -> Iterator[PipeClient]:
    c = PipeClient(tmp_path)
    yield c
    c.close()


async def test_routes_each_reply_to_its_request(client: PipeClient) -> None:
    assert client.wait_ready(10.0)
    decoders = [FrameDecoder(1 << 20) for _ in range(3)]
    cmds = ["sleep 0.3; echo slow", "echo fast >&2; exit 3", "printf '%s' middle"]
    done = [client.run(request(cmd), dec) for cmd, dec in zip(cmds, decoders, strict=True)]
    await asyncio.wait_for(asyncio.gather(*done), 20.0)
    results = [dec.result() for dec in decoders]
    assert [r.stdout for r in results] == ["slow\n", "", "middle"]
    assert results[1].stderr == "fast\n"
    assert [r.exit_code for r in results] == [0, 3, 0]


async def test_a_dead_server_fails_pending_and_new_requests(client: PipeClient) -> None:
    assert client.wait_ready(10.0)
    pending = client.run(request("sleep 30"), FrameDecoder(1 << 20))
    client.proc.kill()
    with pytest.raises(ServerGone, match="the pipe closed"):
        await asyncio.wait_for(pending, 10.0)
    assert not client.alive
    with pytest.raises(ServerGone):
        client.run(request("true"), FrameDecoder(1 << 20))


async def test_slot_restarts_dead_servers_up_to_its_limit() -> None:
    starts: list[ServerClient] = []

    async def start() -> ServerClient:
        server = ServerClient()
        starts.append(server)
        return server

    slot: ServerSlot[ServerClient] = ServerSlot(2)
    first = await slot.get(start)
    assert await slot.get(start) is first
    assert first is not None
    first._end("killed")
    second = await slot.get(start)
    assert second is not None and second is not first
    second._end("killed")
    assert await slot.get(start) is None
    assert len(starts) == 2
    assert slot.take() is second
    assert slot.current is None


async def test_slot_stops_trying_once_a_start_says_it_cannot_run() -> None:
    calls = 0

    async def start() -> ServerClient | None:
        nonlocal calls
        calls += 1
        return None

    slot: ServerSlot[ServerClient] = ServerSlot(3)
    assert await slot.get(start) is None
    assert await slot.get(start) is None
    assert calls == 1
