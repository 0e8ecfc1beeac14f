"""Reliability on the real engine: lost containers, process trees, cancellation, dead engines."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import docker
import pytest
import pytest_asyncio

from patchgym_docker.backend import DockerBackend
from patchgym_docker.sandbox import DockerSandbox
from patchgym_sandbox import (
    BackendUnavailable,
    ImageNotFound,
    SandboxLost,
    SandboxSpec,
    create_backend,
)
from patchgym_sandbox import labels as L
from patchgym_sandbox.testing.waits import eventually

Config = Callable[..., dict[str, Any]]
HANG_GUARD_S = 60  # far above the expected seconds: catches hangs, never decides on speed


@pytest_asyncio.fixture(params=["server", "exec"])
async def backend(
    request: pytest.FixtureRequest, docker_config: Config, test_image: str
) -> AsyncIterator[DockerBackend]:
    b = create_backend(docker_config(exec_mode=request.param))
    assert isinstance(b, DockerBackend)
    yield b
    await b.aclose()


@pytest_asyncio.fixture
async def sb(backend: DockerBackend, test_image: str) -> AsyncIterator[DockerSandbox]:
    s = backend.sandbox(SandboxSpec(image=test_image))
    assert isinstance(s, DockerSandbox)
    async with s:
        yield s


def processes(engine: docker.DockerClient, cid: str) -> list[str]:
    """Command lines of every live process in the container, seen from the engine (outside).

    A zombie (state Z) is already dead, waiting for its reaper (the container's init) to
    collect it: it holds no memory, files or CPU, so it does not count as left running.
    """
    top = engine.api.top(cid, ps_args="-eo pid,stat,args")
    return [proc[-1][:80] for proc in top["Processes"] if not proc[1].startswith("Z")]


def only_keepalive(procs: list[str]) -> bool:
    """Nothing but init, the keepalive ``sleep infinity`` and the exec server runs."""
    return all(
        "init" in p or p.startswith("sleep infinity") or "patchgym exec server" in p for p in procs
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["kill", "remove"])
async def test_container_killed_during_exec_is_sandbox_lost(
    sb: DockerSandbox, engine: docker.DockerClient, how: str
) -> None:
    running = asyncio.ensure_future(sb.exec("echo started; sleep 300", timeout=600))
    await asyncio.sleep(1.0)
    if how == "kill":
        await asyncio.to_thread(engine.api.kill, sb.container_id)
    else:
        await asyncio.to_thread(engine.api.remove_container, sb.container_id, force=True)
    with pytest.raises(SandboxLost, match=sb.id):
        await asyncio.wait_for(running, HANG_GUARD_S)
    with pytest.raises(SandboxLost):
        await asyncio.wait_for(sb.exec("true"), HANG_GUARD_S)
    if how == "remove":  # a stopped container's files stay readable; a removed one's do not
        with pytest.raises(SandboxLost):
            await asyncio.wait_for(sb.read_file("README.md"), HANG_GUARD_S)


@pytest.mark.asyncio
async def test_background_child_past_deadline_leaves_no_process(
    sb: DockerSandbox, engine: docker.DockerClient
) -> None:
    cmd = "(sleep 120; touch /tmp/late) & nohup setsid sleep 130 >/dev/null 2>&1 & sleep 140"
    r = await sb.exec(cmd, timeout=1.5)
    assert r.timed_out and r.exit_code == 124
    procs = processes(engine, sb.container_id)
    assert only_keepalive(procs), f"left behind after the deadline: {procs}"


@pytest.mark.asyncio
async def test_cancelled_exec_kills_its_processes(
    sb: DockerSandbox, engine: docker.DockerClient
) -> None:
    task = asyncio.ensure_future(sb.exec("sleep 200 & sleep 210"))
    await asyncio.sleep(1.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the kill runs in the background
    assert await eventually(lambda: only_keepalive(processes(engine, sb.container_id))), (
        f"cancelled exec left: {processes(engine, sb.container_id)}"
    )


@pytest.mark.asyncio
async def test_session_close_kills_its_processes(
    sb: DockerSandbox, engine: docker.DockerClient
) -> None:
    async with sb.session() as sh:
        assert (await sh.run("sleep 220 & echo ok")).output.strip().endswith("ok")
    # the kill runs in the server's background (a loaded machine once saw it unfinished)
    assert await eventually(lambda: only_keepalive(processes(engine, sb.container_id))), (
        f"closed session left: {processes(engine, sb.container_id)}"
    )


@pytest.mark.asyncio
async def test_nonexistent_image_fails_fast(backend: DockerBackend) -> None:
    t0 = time.monotonic()
    s = backend.sandbox(SandboxSpec(image="local/patchgym-no-such-image:404"))
    with pytest.raises(ImageNotFound, match="no-such-image"):
        await asyncio.wait_for(s.exec("true"), HANG_GUARD_S)
    assert time.monotonic() - t0 < HANG_GUARD_S
    assert s.closed


@pytest.mark.asyncio
async def test_unreachable_engine_is_backend_unavailable(
    docker_config: Config, tmp_path: Any
) -> None:
    dead = create_backend(docker_config(base_url=f"unix://{tmp_path}/no-docker.sock"))
    with pytest.raises(BackendUnavailable, match="Docker engine"):
        await asyncio.wait_for(dead.list_sandboxes(), HANG_GUARD_S)
    with pytest.raises(BackendUnavailable):
        await asyncio.wait_for(dead.sandbox(SandboxSpec(image="x")).start(), HANG_GUARD_S)
    await dead.aclose()


@pytest.mark.asyncio
async def test_event_loop_stays_responsive(backend: DockerBackend, test_image: str) -> None:
    """SDK calls run in the backend's pool: a ticker keeps ticking through create + exec."""
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    t = asyncio.ensure_future(ticker())
    async with backend.sandbox(SandboxSpec(image=test_image)) as s:
        await s.exec("sleep 1")
    stop.set()
    await t
    assert ticks > 20


@pytest.mark.asyncio
async def test_killed_exec_server_restarts(docker_config: Config, test_image: str) -> None:
    """A command that kills the exec server ends with exit 137 (its own doing, not infra:
    a policy must not turn a bad rollout into a dropped one); the next command works."""
    backend = create_backend(docker_config(exec_mode="server"))
    async with backend.sandbox(SandboxSpec(image=test_image)) as s:
        assert (await s.exec("true")).ok
        r = await s.exec("kill -9 $PPID; sleep 1")  # the command's parent is the server
        assert r.exit_code == 137 and "killed the sandbox's exec server" in r.stderr
        assert (await s.exec("echo again")).stdout == "again\n"
    await backend.aclose()


DRIVER = """
import asyncio, json, sys
from patchgym_sandbox import SandboxSpec, create_backend

async def main(args):
    backend = create_backend(args["config"])
    boxes = [backend.sandbox(SandboxSpec(image=args["image"], run_id=args["run_id"])) for _ in range(8)]
    await asyncio.gather(*(b.start() for b in boxes))
    runs = [asyncio.ensure_future(b.exec("sleep 600", timeout=900)) for b in boxes]
    await asyncio.sleep(1.0)
    print("READY", flush=True)
    await asyncio.gather(*runs)

asyncio.run(main(json.loads(sys.argv[1])))
"""


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["server", "exec"])
async def test_sigkilled_driver_mid_exec_then_reap(
    docker_config: Config, test_image: str, mode: str
) -> None:
    """SIGKILL a driver while 8 sandboxes each run a command; reap leaves 0 containers."""
    config = docker_config(exec_mode=mode)
    run_id = f"sigkill-{uuid.uuid4().hex[:8]}"
    payload = json.dumps({"config": config, "image": test_image, "run_id": run_id})
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, payload], stdout=subprocess.PIPE, text=True
    )
    backend = create_backend(config)
    try:
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 180)  # type: ignore[union-attr]
        assert line.startswith("READY"), f"driver failed: {line!r}"
        assert len(await backend.list_sandboxes({L.RUN_ID: run_id})) == 8
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    removed = await backend.reap({L.RUN_ID: run_id}, expired=False)
    assert len(removed) == 8
    assert not await backend.list_sandboxes({L.RUN_ID: run_id})
    await backend.aclose()


@pytest.mark.asyncio
async def test_deadline_holds_when_command_closes_its_output(
    sb: DockerSandbox, engine: docker.DockerClient
) -> None:
    """A command that closes stdout/stderr and keeps running still dies at its deadline."""
    r = await asyncio.wait_for(
        sb.exec("echo before; exec >&- 2>&-; sleep 300", timeout=1.5), HANG_GUARD_S
    )
    assert r.timed_out and r.exit_code == 124 and r.stdout == "before\n"
    procs = processes(engine, sb.container_id)
    assert only_keepalive(procs), f"left behind after the deadline: {procs}"
