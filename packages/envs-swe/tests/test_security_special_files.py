"""A hostile policy plants special files named like sources, then calls every file tool.

Planted in the working copy: a FIFO (``fifo.py``), a 256 MB sparse file behind a 7-byte
link (``big.py``), a socket, links to ``/dev/zero`` and ``/dev/tty``, and a dangling
absolute link where a directory should be (``gone/``). Every file tool of every scaffold
(view, create, str_replace, insert, undo; debug-gym's view and edit; graph-planner's
repair edits) must answer each with an error observation that says why (viewing the big
file may instead show its first lines, capped), promptly (a
deadline far past a refusal decides a hang, not a speed), with the episode alive and
never an infra error, on local and (where the engine runs) docker.
"""

from __future__ import annotations

import asyncio
import resource
from typing import Any

import pytest
from conftest import docker_config

from patchgym_envs import SWEEnv, bundled_task

PLANT = (
    "mkfifo fifo.py && truncate -s 256M huge.bin && ln -s huge.bin big.py && "
    "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock.py')\" && "
    "ln -s /dev/zero zero.py && ln -s /dev/tty tty.py && ln -s /nonexistent/pg-gone gone"
)
SPECIAL = ["fifo.py", "big.py", "sock.py", "zero.py", "tty.py"]
DEADLINE_S = 240.0
"""Per step: far past a refusal (a few commands), well short of forever."""


@pytest.fixture(params=["local", "docker"])
def sandbox_config(request: pytest.FixtureRequest, local_config: dict[str, Any]) -> dict[str, Any]:
    if request.param == "local":
        return local_config
    return docker_config("wordwrap")


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def editor_calls(tool: str, path: str) -> list[dict[str, Any]]:
    return [
        call(tool, command="view", path=path),
        call(tool, command="view", path=path, view_range=[1, 5]),
        call(tool, command="str_replace", path=path, old_str="a", new_str="b"),
        call(tool, command="insert", path=path, insert_line=0, new_str="pwned"),
        call(tool, command="create", path=path, file_text="pwned\n"),
        call(tool, command="undo_edit", path=path),
    ]


def attacks(scaffold: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name in SPECIAL:
        path = f"/testbed/{name}"
        if scaffold == "r2egym":
            out += editor_calls("file_editor", path)
        elif scaffold == "sweagent":
            out += editor_calls("str_replace_editor", path)
        elif scaffold == "debug-gym":
            out += [
                call("view", path=name),
                call("view", path=name, start=1, end=3),
                call("edit", path=name, start=1, end=1, new_code="pwned"),
            ]
        else:
            edits = [{"path": name, "search": "a", "replace": "b"}]
            out.append(call("repair", targets=[name], edits=edits))
    gone = "/testbed/gone/new.py"
    if scaffold == "r2egym":
        out.append(call("file_editor", command="create", path=gone, file_text="x\n"))
    elif scaffold == "sweagent":
        out.append(call("str_replace_editor", command="create", path=gone, file_text="x\n"))
    return out


SHELL = {"r2egym": ("execute_bash", "cmd"), "sweagent": ("execute_bash", "command")}
SHELL |= {"debug-gym": ("bash", "command")}


async def plant(env: SWEEnv, scaffold: str, cmd: str) -> str:
    """Run ``cmd`` as the policy would (graph-planner has no shell: straight in the sandbox)."""
    if scaffold in SHELL:
        tool, arg = SHELL[scaffold]
        obs, _, done, _ = await env.astep(call(tool, **{arg: cmd}))
        assert not done, obs
        return obs
    await env.astep(call("explore", op="search", query="wrap"))
    assert env.sandbox is not None
    return (await env.sandbox.exec(cmd, timeout=120)).output


@pytest.mark.parametrize("scaffold", ["r2egym", "sweagent", "debug-gym", "graph-planner"])
async def test_every_file_tool_refuses_special_files(
    sandbox_config: dict[str, Any], scaffold: str
) -> None:
    env = SWEEnv(bundled_task("wordwrap"), sandbox=sandbox_config, scaffold=scaffold)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    await env.areset()
    try:
        obs = await plant(env, scaffold, PLANT)
        assert "error" not in obs.lower(), obs
        for action in attacks(scaffold):
            try:
                obs, _, done, info = await asyncio.wait_for(env.astep(action), DEADLINE_S)
            except TimeoutError:
                pytest.fail(f"{action} hung the driver for {DEADLINE_S:g} s")
            assert not done, (action, obs, info.get("infra_error"))
            viewing_big = "big.py" in str(action) and "view" in str(action)
            assert info["error"] or viewing_big, (action, obs)  # a capped view of a big file
            assert len(obs) < 20_000
        assert "fifo-intact" in await plant(env, scaffold, "test -p fifo.py && echo fifo-intact")
    finally:
        await env.aclose()
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert grown_mb < 512, f"the driver's peak memory grew by {grown_mb:.0f} MiB"
