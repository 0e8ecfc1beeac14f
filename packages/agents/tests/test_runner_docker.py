"""The runner on the real Docker engine: a container removed mid-episode is infra, not a 0.

Needs the docker CLI, a running engine, ``local/bookworm-py`` (built by
``ci/engines/docker-up.sh``) and the ``docker`` backend (this package's test
group installs it; the code under test reaches it only through ``create_backend``).
Skips with the reason otherwise, or fails under ``PATCHGYM_REQUIRE_ENGINES=1``.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from killing import KillOne

from patchgym_agents import EpisodeResult, GoldPatchPolicy, RolloutConfig, rollout
from patchgym_agents.envs_api import bundled_tasks
from patchgym_envs.bundled.docker import base_image_problem, build_image
from patchgym_sandbox import available_backends, create_backend
from patchgym_sandbox.testing import engine_missing


def _docker_ready() -> str | None:
    if "docker" not in available_backends():
        return "the docker backend (patchgym-sandbox-docker) is not installed"
    return base_image_problem()


async def test_sixteen_on_docker_one_container_removed(tmp_path: Path) -> None:
    if (reason := _docker_ready()) is not None:
        engine_missing(reason)
    tasks = bundled_tasks()[:4]
    for task in tasks:
        await asyncio.to_thread(build_image, str(task.metadata["bundled_name"]))
    backend = create_backend({"type": "docker"})
    victim = (tasks[1].id, 2)
    config = RolloutConfig(
        samples=4,
        sandbox_groups=False,  # KillOne finds its victim by the per-sample rollout-id label
        concurrency=16,
        infra_retries=0,
        output_dir=tmp_path / "run",
        env={"run_id": f"agents-test-{uuid.uuid4().hex[:8]}"},
        progress=False,
    )
    policy = KillOne(backend, victim, run_id=config.env.run_id)
    seen: list[EpisodeResult] = []
    try:
        summary = await rollout(tasks, policy, config, backend=backend, on_result=seen.append)
        assert policy.kills == 1
        assert summary.finished == 16 and summary.graded == summary.resolved == 15, summary
        assert summary.infra_failed == 1 and summary.leaked_sandboxes == []
        (failed,) = [r for r in seen if r.status == "infra_error"]
        assert (failed.task_id, failed.sample) == victim and failed.resolved is None
        assert "SandboxLost" in (failed.infra_error or "")
        assert await backend.list_sandboxes({"patchgym.run-id": summary.run_id}) == []
        again: list[EpisodeResult] = []
        summary2 = await rollout(
            tasks, GoldPatchPolicy(), config, backend=backend, on_result=again.append
        )
        assert [(r.task_id, r.sample) for r in again] == [victim]
        assert summary2.resolved == 16
    finally:
        await backend.reap(
            {"patchgym.run-id": config.env.run_id or summary_run_id(config)}, expired=False
        )
        await backend.aclose()


def summary_run_id(config: RolloutConfig) -> str:
    from patchgym_agents.rollout import default_run_id

    return default_run_id(config)


async def test_images_pulled_as_is_are_prepared_before_any_episode(tmp_path: Path) -> None:
    """A run whose image cannot be reduced fails before its first episode, naming it."""
    if (reason := _docker_ready()) is not None:
        engine_missing(reason)
    from patchgym_envs.errors import ImageCleanInfraError

    image = f"local/sweb.eval.x86_64.patchgym-missing-{uuid.uuid4().hex[:10]}:1"
    tasks = [t.model_copy(update={"image": image}) for t in bundled_tasks()[:2]]
    config = RolloutConfig(
        samples=2,
        output_dir=tmp_path / "run",
        env={"sandbox": {"type": "docker"}, "run_id": f"agents-test-{uuid.uuid4().hex[:8]}"},
        progress=False,
    )
    seen: list[EpisodeResult] = []
    with pytest.raises(ImageCleanInfraError, match="no such image") as failed:
        await rollout(tasks, GoldPatchPolicy(), config, on_result=seen.append)
    assert list(failed.value.failures) == [image] and seen == []
