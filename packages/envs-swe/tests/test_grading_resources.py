"""The fresh grading sandbox is built from the env's settings, as the episode's is: an
override of ``env.resources`` reaches every sandbox an episode uses (a host that cannot
enforce the 4 GiB default must not see it come back at the first grade), with the grader's
memory headroom on top."""

from __future__ import annotations

from patchgym_envs import EnvConfig, bundled_task, evaluate_patch
from patchgym_envs.sandboxes import GRADER_HEADROOM_MB, grading_resources
from patchgym_sandbox import Resources, SandboxBackend, SandboxSpec


async def test_grading_sandbox_honours_env_resources(
    backend: SandboxBackend, specs: list[SandboxSpec]
) -> None:
    task = bundled_task("intervals")
    res = Resources(memory_mb=1536, pids=512, disk_mb=1024)
    env = EnvConfig(resources=res, lease_s=900.0, run_id="pg-res")
    verdict = await evaluate_patch(task, task.gold_patch, backend, env=env, rollout_id="r-grade")
    assert verdict.infra_error is None and verdict.resolved
    [spec] = specs
    assert spec.resources == res.model_copy(update={"memory_mb": 1536 + GRADER_HEADROOM_MB})
    assert spec.lease_s == 900.0 and spec.run_id == "pg-res"
    assert spec == env.sandbox_spec(task, backend, rollout_id="r-grade", grading=True)
    episode = env.sandbox_spec(task, backend, rollout_id="r-grade")  # the episode's source
    assert spec == episode.model_copy(update={"resources": grading_resources(res)})


async def test_without_env_the_defaults_apply(
    backend: SandboxBackend, specs: list[SandboxSpec]
) -> None:
    task = bundled_task("intervals")
    await evaluate_patch(task, "", backend)
    assert specs[0].resources == grading_resources(EnvConfig().resources)


def test_headroom_covers_a_full_disk() -> None:
    """The memory limit always exceeds the disk (a tmpfs on local) by the headroom."""
    got = grading_resources(Resources(memory_mb=256, disk_mb=1024, pids=64))
    assert got == Resources(memory_mb=1024 + GRADER_HEADROOM_MB, disk_mb=1024, pids=64)
    assert grading_resources(Resources(disk_mb=64)) == Resources(disk_mb=64)
    assert grading_resources(Resources(memory_mb=100)).memory_mb == 100 + GRADER_HEADROOM_MB
