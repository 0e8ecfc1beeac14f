"""The runner: 16 concurrent episodes, one sandbox killed mid-episode, no leaks, resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from killing import KillOne

from patchgym_agents import EpisodeResult, GoldPatchPolicy, RolloutConfig, rollout
from patchgym_agents.envs_api import bundled_tasks
from patchgym_agents.rollout import ResultStore
from patchgym_sandbox import SandboxLost
from patchgym_sandbox.local.backend import LocalBackend, LocalSandbox
from patchgym_sandbox.local.config import LocalConfig
from patchgym_sandbox.result import ExecResult
from patchgym_sandbox.sandbox import ExecRequest


class DetectingLocalSandbox(LocalSandbox):
    """A local sandbox that notices when it was removed underneath it, as remote ones do.

    The stock local backend answers a command in a deleted working copy with exit 127;
    a container or pod backend raises SandboxLost. This reports the loss the same way.
    """

    def _check(self) -> None:
        if not self._base.exists():
            raise SandboxLost(f"sandbox {self.id} is gone (its working copy was removed)")

    async def _exec(self, req: ExecRequest) -> ExecResult:
        self._check()
        return await super()._exec(req)

    async def _read_file(self, path: str, max_bytes: int) -> bytes:
        self._check()
        return await super()._read_file(path, max_bytes)

    async def _write_file(self, path: str, data: bytes, mode: int) -> None:
        self._check()
        await super()._write_file(path, data, mode)


class DetectingLocalBackend(LocalBackend):
    def _make_sandbox(self, spec: Any) -> LocalSandbox:
        return DetectingLocalSandbox(self, spec)


async def test_sixteen_concurrent_one_killed_then_resume(tmp_path: Path) -> None:
    backend = DetectingLocalBackend(LocalConfig(state_dir=tmp_path / "state"))
    tasks = bundled_tasks()[:4]
    victim = (tasks[2].id, 1)
    out = tmp_path / "run"
    config = RolloutConfig(
        samples=4,
        sandbox_groups=False,  # KillOne finds its victim by the per-sample rollout-id label
        concurrency=16,
        infra_retries=1,
        retry_backoff_s=0.1,
        output_dir=out,
        progress=False,
    )
    seen: list[EpisodeResult] = []
    policy = KillOne(backend, victim)
    try:
        summary = await rollout(tasks, policy, config, backend=backend, on_result=seen.append)
        assert summary.episodes == summary.finished == 16
        assert summary.graded == summary.resolved == 15, summary
        assert summary.infra_failed == 1 and summary.infra_retries == 1
        assert summary.leaked_sandboxes == [] and await backend.list_sandboxes() == []
        assert policy.kills == 2  # first attempt and the retry
        failed = [r for r in seen if r.status == "infra_error"]
        assert [(r.task_id, r.sample) for r in failed] == [victim]
        assert failed[0].resolved is None and failed[0].reward is None  # no fake 0
        assert "SandboxLost" in (failed[0].infra_error or "")
        assert failed[0].attempt == 2 and len(failed[0].infra_attempts) == 1
        lines = (out / "trajectories.jsonl").read_text().splitlines()
        assert len(lines) == 16
        on_disk = json.loads((out / "summary.json").read_text())
        assert on_disk["resolved"] == 15 and on_disk["infra_failed"] == 1

        # a rerun redoes only the infra-failed episode
        again: list[EpisodeResult] = []
        summary2 = await rollout(
            tasks, GoldPatchPolicy(), config, backend=backend, on_result=again.append
        )
        assert [(r.task_id, r.sample) for r in again] == [victim]
        assert summary2.graded == summary2.resolved == 16 and summary2.infra_failed == 0
        assert len(ResultStore(out).load()) == 16
        assert await backend.list_sandboxes() == []

        # a third run has nothing left to do
        third: list[EpisodeResult] = []
        await rollout(tasks, GoldPatchPolicy(), config, backend=backend, on_result=third.append)
        assert third == []
    finally:
        await backend.reap(expired=False)
        await backend.aclose()


async def test_samples_share_one_group_per_task(tmp_path: Path) -> None:
    backend = LocalBackend(LocalConfig(state_dir=tmp_path / "state"))
    made: list[int] = []
    create_group = backend.create_group

    async def counting(spec: Any, n: int) -> list[Any]:
        made.append(n)
        return await create_group(spec, n)

    backend.create_group = counting  # type: ignore[method-assign]
    config = RolloutConfig(samples=3, concurrency=6, output_dir=tmp_path / "run", progress=False)
    seen: list[EpisodeResult] = []
    try:
        summary = await rollout(
            bundled_tasks()[:2], GoldPatchPolicy(), config, backend=backend, on_result=seen.append
        )
        assert summary.resolved == 6 and summary.leaked_sandboxes == []
        assert made == [3, 3]  # one group of 3 per task
        assert all(r.sandbox_s > 0 and "create" in r.phases for r in seen)
        assert await backend.list_sandboxes() == []
    finally:
        await backend.aclose()


async def test_torn_last_line_is_ignored_and_repaired(
    tmp_path: Path, local_config: dict[str, Any]
) -> None:
    out = tmp_path / "run"
    config = RolloutConfig(env={"sandbox": local_config}, output_dir=out, progress=False)
    tasks = bundled_tasks()[:2]
    await rollout(tasks[:1], GoldPatchPolicy(), config)
    with (out / "trajectories.jsonl").open("a") as fh:
        fh.write('{"task_id": "half-writ')  # a crash mid-write
    summary = await rollout(tasks, GoldPatchPolicy(), config)
    assert summary.resolved == 2
    assert len(ResultStore(out).load()) == 2
