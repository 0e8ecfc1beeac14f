"""SWEEnv with a provisioned sandbox (a group member) and its phase record."""

from __future__ import annotations

import asyncio
from typing import Any

from patchgym_envs import SWEEnv, bundled_task
from patchgym_sandbox import SandboxGroups, create_backend


def gold_submit(task: Any) -> list[dict[str, Any]]:
    patch = {"cmd": f"git apply - <<'PATCH_EOF'\n{task.gold_patch}PATCH_EOF"}
    return [{"name": "execute_bash", "arguments": patch}, {"name": "finish", "arguments": {}}]


async def test_group_members_run_episodes_and_phases_are_recorded(local_config) -> None:
    task = bundled_task("romanum")
    backend = create_backend(local_config)
    groups = SandboxGroups(backend, 3)

    async def episode(k: int) -> dict[str, Any]:
        env = SWEEnv(
            task,
            backend=backend,
            idx=k,
            provision=lambda be, spec: groups.claim(task.id, spec),
        )
        try:
            await env.areset()
            info: dict[str, Any] = {}
            for action in gold_submit(task) if k == 0 else gold_submit(task)[1:]:
                _, _, _, info = await env.astep(action)
            return info
        finally:
            await env.aclose()

    try:
        infos = await asyncio.gather(*(episode(k) for k in range(3)))
    finally:
        await groups.aclose()
    assert groups.groups_made == 1
    assert [i["resolved"] for i in infos] == [True, False, False]  # separate working copies
    for info in infos:
        phases = info["phases"]
        assert {"create", "tool", "grading", "close", "grading_create", "grading_close"} <= set(
            phases
        )  # the fresh grading sandbox's create and close are phases of their own
        assert info["sandbox_s"] > 0 and phases["grading"] > 0
    assert await backend.list_sandboxes() == []
    await backend.aclose()
