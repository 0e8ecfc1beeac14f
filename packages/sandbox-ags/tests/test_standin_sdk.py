"""The stand-in speaks envd and the control plane to the unmodified SDK (its public API only)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import e2b
import httpx
import pytest
from conftest import API_KEY
from e2b import AsyncSandbox, SandboxQuery

from patchgym_sandbox.testing.waits import eventually


@pytest.fixture
async def sbx(standin: Any) -> AsyncIterator[AsyncSandbox]:
    s = await AsyncSandbox.create(
        template="pg-repo", metadata={"suite": "sdk"}, envs={"FROM_CREATE": "yes"},
        api_key=API_KEY, api_url=standin.url, sandbox_url=standin.url,
    )  # fmt: skip
    yield s
    await s.kill()


async def test_commands(sbx: AsyncSandbox) -> None:
    res = await sbx.commands.run("echo $FROM_CREATE; pwd; cat README.txt", cwd="/testbed")
    assert res.stdout == "yes\n/testbed\ntemplate file\n"
    with pytest.raises(e2b.CommandExitException) as exc:
        await sbx.commands.run("echo out; echo err >&2; exit 7")
    assert exc.value.exit_code == 7 and exc.value.stdout == "out\n" and exc.value.stderr == "err\n"
    seen: list[str] = []
    await sbx.commands.run("echo a; echo b >&2", on_stdout=seen.append, on_stderr=seen.append)
    assert sorted(seen) == ["a\n", "b\n"]


async def test_background_stdin_list_connect_kill(sbx: AsyncSandbox) -> None:
    h = await sbx.commands.run("read x; echo got $x; sleep 60", background=True, stdin=True)
    await sbx.commands.send_stdin(h.pid, "hello\n")
    assert h.pid in [p.pid for p in await sbx.commands.list()]
    other = await sbx.commands.connect(h.pid)
    assert await eventually(lambda: "got hello" in (h.stdout or ""))
    assert await sbx.commands.kill(h.pid)
    with pytest.raises(e2b.CommandExitException):
        await h.wait()
    assert "got hello" in (h.stdout or "")
    with pytest.raises(e2b.CommandExitException):
        await other.wait()


async def test_pty(sbx: AsyncSandbox) -> None:
    out = bytearray()
    h = await sbx.pty.create(size=e2b.PtySize(rows=24, cols=80), on_data=out.extend, cwd="/testbed")
    await sbx.pty.send_stdin(h.pid, b"echo pty-$((6*7)); exit\n")
    await h.wait()
    assert b"pty-42" in out


async def test_filesystem(sbx: AsyncSandbox) -> None:
    await sbx.files.write("/testbed/d/a.txt", "A")
    assert await sbx.files.read("/testbed/d/a.txt") == "A"
    assert await sbx.files.exists("/testbed/d/a.txt")
    assert await sbx.files.make_dir("/testbed/e") and not await sbx.files.make_dir("/testbed/e")
    await sbx.files.rename("/testbed/d/a.txt", "/testbed/e/b.txt")
    names = [e.name for e in await sbx.files.list("/testbed/e")]
    assert names == ["b.txt"]
    info = await sbx.files.get_info("/testbed/e/b.txt")
    assert info.size == 1 and info.path == "/testbed/e/b.txt"
    await sbx.files.remove("/testbed/e")
    assert not await sbx.files.exists("/testbed/e")
    with pytest.raises(e2b.NotFoundException):
        await sbx.files.read("/testbed/nope")
    blob = bytes(range(256)) * 4096
    await sbx.files.write("/tmp/blob", blob)
    assert bytes(await sbx.files.read("/tmp/blob", format="bytes")) == blob


async def test_watch_dir(sbx: AsyncSandbox) -> None:
    events: list[Any] = []
    handle = await sbx.files.watch_dir("/testbed", on_event=events.append)
    await sbx.files.write("/testbed/new.txt", "x")
    await eventually(lambda: any(e.name == "new.txt" for e in events))
    await handle.stop()
    assert any(e.name == "new.txt" for e in events)


async def test_control_plane(standin: Any, sbx: AsyncSandbox) -> None:
    opts = {"api_key": API_KEY, "api_url": standin.url, "sandbox_url": standin.url}
    pager = AsyncSandbox.list(query=SandboxQuery(metadata={"suite": "sdk"}), **opts)
    ids = [s.sandbox_id for s in await pager.next_items()]
    assert ids == [sbx.sandbox_id]
    assert await sbx.is_running()
    await sbx.set_timeout(1)
    await asyncio.sleep(2.0)
    assert not await sbx.is_running()


async def test_auth_is_checked(standin: Any) -> None:
    with pytest.raises(e2b.AuthenticationException):
        await AsyncSandbox.create(
            template="base", api_key="wrong", api_url=standin.url, sandbox_url=standin.url
        )
    s = await AsyncSandbox.create(
        template="base", api_key=API_KEY, api_url=standin.url, sandbox_url=standin.url
    )
    try:
        async with httpx.AsyncClient() as c:
            r = await c.get(
                f"{standin.url}/files",
                params={"path": "/etc/hostname"},
                headers={"E2b-Sandbox-Id": s.sandbox_id},
            )
        assert r.status_code == 401
    finally:
        await s.kill()
