"""A script that exits without closing its env leaves nothing behind (local and docker).

The exit hook closes every live env after Python has shut its thread pools; the close
must still run to the end: the sandbox's directory, mounts, ``/etc`` copy and processes
on local, the container on docker.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from conftest import docker_config

from patchgym_sandbox import create_backend
from patchgym_sandbox.testing.security import host_processes_with

DRIVER = r"""
import json, sys
from patchgym_envs import SWEEnv, bundled_task
config, run_id = json.loads(sys.argv[1]), sys.argv[2]
env = SWEEnv(bundled_task("csvlite"), sandbox=config, run_id=run_id, step_timeout_s=120)
env.reset()
obs, *_ = env.step({"name": "execute_bash", "arguments": {"cmd": "sleep 600 & echo started"}})
assert "started" in obs, obs
print(json.dumps({"sandbox": env.sandbox.id}), flush=True)
"""


def run_driver(config: dict[str, Any], run_id: str) -> str:
    """Run the driver to its end (no close) and return its sandbox's id."""
    out = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(config), run_id],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "at exit failed" not in out.stderr, out.stderr[-3000:]
    return str(json.loads(out.stdout.strip().splitlines()[-1])["sandbox"])


async def leftovers(config: dict[str, Any], run_id: str) -> list[str]:
    backend = create_backend(config)
    try:
        left = [s.id for s in await backend.list_sandboxes({"patchgym.run-id": run_id})]
        if left:  # clean up for the next test before failing this one
            await backend.reap({"patchgym.run-id": run_id}, expired=False)
        return left
    finally:
        await backend.aclose()


def test_local_exit_without_close_leaves_nothing(local_config: dict[str, Any]) -> None:
    run_id = f"exit-{uuid.uuid4().hex[:8]}"
    state = Path(local_config["state_dir"])
    sandbox_id = run_driver(local_config, run_id)
    assert asyncio.run(leftovers(local_config, run_id)) == []
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(state) not in mounts, "mounts of the sandbox stayed"
    assert sorted(p.name for p in state.iterdir() if p.name.startswith(("pg-", "etc-"))) == []
    assert host_processes_with(sandbox_id) == []


def test_docker_exit_without_close_leaves_nothing() -> None:
    config = docker_config("csvlite")
    run_id = f"exit-{uuid.uuid4().hex[:8]}"
    run_driver(config, run_id)
    assert asyncio.run(leftovers(config, run_id)) == []
