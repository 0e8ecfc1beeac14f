"""The bundled tasks' Docker images: gold resolves, empty does not, on the real engine.

Needs the docker CLI, a running engine and ``local/bookworm-py`` (built by
``ci/engines/docker-up.sh``); skips with the reason otherwise, or fails when
``PATCHGYM_REQUIRE_ENGINES=1`` (as in CI). The sandbox here
is a thin docker-CLI adapter over the grading protocol (envs never import a backend
package; the docker backend's own end-to-end run belongs to the trainer's validate).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Mapping

import pytest

from patchgym_envs import bundled_names, bundled_task, grading
from patchgym_envs.bundled.docker import base_image_problem, build_image
from patchgym_sandbox import ExecResult
from patchgym_sandbox.testing import engine_missing


@pytest.fixture(scope="module", autouse=True)
def docker_engine() -> None:
    """Skip without an engine, or fail under PATCHGYM_REQUIRE_ENGINES=1 (CI)."""
    reason = base_image_problem()
    if reason is not None:
        engine_missing(reason)


class DockerCliSandbox:
    workdir = "/testbed"

    def __init__(self, container: str) -> None:
        self.container = container

    async def exec(
        self,
        cmd: str,
        *,
        timeout: float | None = None,
        idle_timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | str | None = None,
    ) -> ExecResult:
        flags = [f"--env={k}={v}" for k, v in (env or {}).items()]
        argv = [
            "docker",
            "exec",
            "-i",
            "-w",
            cwd or self.workdir,
            *flags,
            self.container,
            "bash",
            "-c",
            cmd,
        ]
        data = stdin.encode() if isinstance(stdin, str) else stdin
        start = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        raw_out, raw_err = await asyncio.wait_for(proc.communicate(data or b""), timeout)
        out, err = raw_out.decode(errors="replace"), raw_err.decode(errors="replace")
        return ExecResult(
            exit_code=proc.returncode or 0,
            stdout=out,
            stderr=err,
            output=out + err,
            duration_s=time.monotonic() - start,
        )

    async def write_file(self, path: str, data: bytes | str) -> None:
        res = await self.exec(f'mkdir -p "$(dirname "{path}")" && cat > "{path}"', stdin=data)
        assert res.exit_code == 0, res.output

    async def read_file(self, path: str) -> bytes:
        return (await self.exec(f'cat "{path}"')).stdout.encode()


def docker(*args: str) -> str:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, check=True
    ).stdout.strip()


async def _grade(image: str, name: str, patch: str) -> grading.Verdict:
    task = bundled_task(name)
    cid = await asyncio.to_thread(
        docker, "run", "-d", "--rm", "--network", "none", image, "sleep", "600"
    )
    try:
        sandbox = DockerCliSandbox(cid)
        if patch:
            applied = await sandbox.exec("git apply -", stdin=patch)
            assert applied.exit_code == 0, applied.output
        return await grading.grade(task, sandbox, patch=patch)
    finally:
        await asyncio.to_thread(docker, "rm", "-f", cid)


@pytest.mark.parametrize("name", bundled_names())
async def test_image_gold_resolves_empty_does_not(name: str) -> None:
    image = await asyncio.to_thread(build_image, name)
    task = bundled_task(name)
    assert image == task.image
    head = await asyncio.to_thread(docker, "run", "--rm", image, "git", "rev-parse", "HEAD")
    assert head == task.base_commit
    gold = await _grade(image, name, task.gold_patch)
    assert gold.resolved and gold.infra_error is None, gold.model_dump_json(indent=1)
    empty = await _grade(image, name, "")
    assert not empty.resolved and empty.infra_error is None
