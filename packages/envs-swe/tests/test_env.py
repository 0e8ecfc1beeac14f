"""SWEEnv's contract: lazy sandbox, cheap reset, endings, grading, infra errors, both APIs."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from patchgym_envs import EnvConfig, SWEEnv, bundled_task, bundled_tasks, write_verl_parquet
from patchgym_envs.readers import read_parquet
from patchgym_envs.sandboxes import clean_patch
from patchgym_sandbox import create_backend


def apply_gold(task) -> dict[str, Any]:
    return {
        "name": "execute_bash",
        "arguments": {"cmd": f"git apply - <<'PATCH_EOF'\n{task.gold_patch}PATCH_EOF"},
    }


def live(local_config: dict[str, Any]) -> list:
    async def go() -> list:
        b = create_backend(local_config)
        try:
            return await b.list_sandboxes()
        finally:
            await b.aclose()

    with ThreadPoolExecutor(1) as pool:  # works inside and outside a running loop
        return pool.submit(asyncio.run, go()).result()


def test_reset_is_cheap_and_idempotent(local_config) -> None:
    task = bundled_task("romanum")
    env = SWEEnv(task, sandbox=local_config)
    for _ in range(3):
        obs, info = env.reset()
        assert obs == task.problem_statement
        assert info["task_id"] == task.id and info["tools"] == [
            "file_editor",
            "search",
            "execute_bash",
            "finish",
        ]
    assert env.sandbox is None and live(local_config) == []
    obs, info = env.reset(task=bundled_task("intervals"))
    assert info["task_id"] == "patchgym__intervals-1"
    env.close()
    assert SWEEnv.is_multithread_safe() is True


def test_from_dict_with_verl_row(local_config, tmp_path: Path) -> None:
    path = write_verl_parquet(bundled_tasks(), tmp_path / "train.parquet")
    row = list(read_parquet(path))[2]
    env = SWEEnv.from_dict(
        {**row["extra_info"], "sandbox": local_config, "scaffold": "sweagent", "max_steps": 3}
    )
    assert env.task == bundled_tasks()[2]
    assert env.idx == 2 and env.config.max_steps == 3 and env.scaffold.name == "sweagent"
    env.idx = 9
    assert env.idx == 9
    env.close()

    class Adapter(SWEEnv):
        pass

    assert type(Adapter.from_dict({**row["extra_info"], "sandbox": local_config})) is Adapter


def test_max_steps_ends_and_grades(local_config) -> None:
    env = SWEEnv(bundled_task("semverlib"), sandbox=local_config, max_steps=2)
    env.reset()
    _, _, done, _ = env.step({"name": "execute_bash", "arguments": {"cmd": "true"}})
    assert not done and env.sandbox is not None
    obs, reward, done, info = env.step({"name": "execute_bash", "arguments": {"cmd": "true"}})
    assert done and reward == 0.0 and info["done_reason"] == "max_steps"
    assert "[episode ended: max_steps]" in obs
    assert info["verdict"]["resolved"] is False and info["reward_valid"] is True
    assert env.sandbox is None and live(local_config) == []
    obs, reward, done, _ = env.step("anything")
    assert done and "episode is over" in obs
    env.close()


def test_wall_clock_budget(local_config) -> None:
    env = SWEEnv(bundled_task("semverlib"), sandbox=local_config, episode_timeout_s=2)
    env.reset()
    obs, _reward, done, info = env.step({"name": "execute_bash", "arguments": {"cmd": "sleep 30"}})
    assert done and info["done_reason"] == "timeout" and "timed out" in obs
    assert info["elapsed_s"] < 30
    env.close()


def test_gold_then_compute_final_reward(local_config) -> None:
    task = bundled_task("wordwrap")
    env = SWEEnv(task, sandbox=local_config)
    env.reset()
    _obs, reward, done, _ = env.step(apply_gold(task))
    assert not done and reward == 0.0
    assert env.compute_final_reward() == 1.0
    assert env.verdict is not None and env.verdict.resolved and env.done
    assert env.compute_final_reward() == 1.0  # graded once
    env.close()
    assert live(local_config) == []


def test_compute_final_reward_without_steps_grades_the_untouched_repo(local_config) -> None:
    env = SWEEnv(bundled_task("csvlite"), sandbox=local_config)
    env.reset()
    assert env.compute_final_reward() == 0.0
    assert env.verdict is not None and env.verdict.infra_error is None
    env.close()


def test_infra_failure_is_marked_not_scored(local_config) -> None:
    task = bundled_task("intervals").model_copy(update={"setup_commands": ["exit 3"]})
    env = SWEEnv(task, sandbox=local_config)
    env.reset()
    obs, reward, done, info = env.step({"name": "execute_bash", "arguments": {"cmd": "true"}})
    assert done and reward == 0.0
    assert info["reward_valid"] is False and "SetupFailed" in info["infra_error"]
    assert info["done_reason"] == "infra_error" and obs.startswith("Infrastructure error")
    assert live(local_config) == []
    env.close()


def test_a_failing_step_keeps_the_sandbox_an_abort_closes_it(local_config, monkeypatch) -> None:
    env = SWEEnv(bundled_task("intervals"), sandbox=local_config)
    env.reset()
    env.step({"name": "execute_bash", "arguments": {"cmd": "true"}})
    sandbox = env.sandbox
    assert len(live(local_config)) == 1

    async def boom(*_: Any) -> Any:
        raise RuntimeError("bug in the loop")

    monkeypatch.setattr(env.scaffold, "execute", boom)
    obs, _, done, _ = env.step({"name": "execute_bash", "arguments": {"cmd": "true"}})
    assert obs.startswith("ERROR") and not done and env.sandbox is sandbox

    class Abort(BaseException):
        pass

    async def abort(*_: Any) -> Any:
        raise Abort()

    monkeypatch.setattr(env.scaffold, "execute", abort)
    with pytest.raises(Abort):
        env.step({"name": "execute_bash", "arguments": {"cmd": "true"}})
    assert env.sandbox is None and live(local_config) == []
    monkeypatch.undo()
    obs, _, done, info = env.step({"name": "execute_bash", "arguments": {"cmd": "true"}})
    assert done and "episode is over" in obs and info["reward_valid"] is False
    env.close()


async def test_blocking_api_inside_a_running_loop(local_config) -> None:
    task = bundled_task("romanum")
    env = SWEEnv(task, sandbox=local_config)
    env.reset()
    env.step(apply_gold(task))
    _, reward, done, _ = env.step(
        "<function=finish>\n<parameter=command>submit</parameter>\n</function>"
    )
    assert done and reward == 1.0
    env.close()


async def test_async_api(local_config) -> None:
    task = bundled_task("semverlib")
    env = SWEEnv(task, sandbox=local_config, scaffold="sweagent")
    obs, _ = await env.areset()
    assert obs == task.problem_statement
    await env.astep(
        {"name": "execute_bash", "arguments": {"command": f"git apply - <<'E'\n{task.gold_patch}E"}}
    )
    _, reward, done, info = await env.astep({"name": "submit", "arguments": {}})
    assert done and reward == 1.0 and info["resolved"]
    await env.aclose()
    assert live(local_config) == []


def test_threads_run_envs_concurrently(local_config) -> None:
    def episode(task) -> float:
        env = SWEEnv(task, sandbox=local_config)
        try:
            env.reset()
            env.step(apply_gold(task))
            return env.step({"name": "finish", "arguments": {}})[1]
        finally:
            env.close()

    with ThreadPoolExecutor(3) as pool:
        rewards = list(pool.map(episode, bundled_tasks()[:3]))
    assert rewards == [1.0, 1.0, 1.0]
    assert live(local_config) == []


CONFTEST_HACK = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""


@pytest.mark.parametrize("name", ["intervals", "ledger"])
def test_planted_conftest_does_not_fake_a_pass(local_config, name: str) -> None:
    env = SWEEnv(bundled_task(name), sandbox=local_config)
    env.reset()
    for path in ("conftest.py", "tests/conftest.py"):
        obs, *_ = env.step(
            {
                "name": "file_editor",
                "arguments": {
                    "command": "create",
                    "path": f"/testbed/{path}",
                    "file_text": CONFTEST_HACK,
                },
            }
        )
        assert "created" in obs
    obs, *_ = env.step(
        {
            "name": "execute_bash",
            "arguments": {"cmd": "python3 -m pytest -q -p no:cacheprovider tests | tail -1"},
        }
    )
    assert "passed" in obs
    _, reward, done, info = env.step({"name": "finish", "arguments": {}})
    assert done and reward == 0.0 and not info["resolved"] and info["reward_valid"]
    assert "conftest.py" in info["patch"]
    env.close()


def test_bundled_template_only_reaches_the_local_backend(local_config) -> None:
    from patchgym_envs.sandboxes import spec_for

    class FakeRemote:
        name = "docker"

    task = bundled_task("ledger")
    remote = spec_for(task, FakeRemote())  # type: ignore[arg-type]
    assert remote.template is None and remote.image == task.image and "PATH" not in remote.env
    local = spec_for(task, create_backend(local_config), python="/opt/py/bin/python3")
    assert local.template is not None and Path(local.template, ".git").is_dir()
    assert local.env["PATH"].startswith("/opt/py/bin:")


def test_shaped_reward_is_opt_in_and_reported_next_to_binary(local_config) -> None:
    task = bundled_task("semverlib")
    env = SWEEnv(task, sandbox=local_config, reward={"type": "binary", "step_penalty": 0.1})
    env.reset()
    env.step(apply_gold(task))
    _, reward, done, info = env.step({"name": "finish", "arguments": {}})
    assert done and info["binary_reward"] == 1.0
    assert reward == pytest.approx(0.8) and info["shaped_reward"] == pytest.approx(0.8)
    env.close()
    with pytest.raises(LookupError, match="unknown reward type"):
        SWEEnv(task, sandbox=local_config, reward={"type": "nope"})


@pytest.mark.parametrize("name", ["ledger", "intervals"])
async def test_sandbox_removed_from_outside_is_an_infra_error(backend, name: str) -> None:
    env = SWEEnv(bundled_task(name), backend=backend)
    await env.areset()
    await env.astep({"name": "execute_bash", "arguments": {"cmd": "true"}})
    assert env.sandbox is not None
    await backend.remove(env.sandbox.id)
    _, reward, done, info = await env.astep({"name": "finish", "arguments": {}})
    assert done and reward == 0.0 and info["reward_valid"] is False
    assert info["infra_error"].startswith("SandboxLost: ")
    await env.aclose()
    assert await backend.list_sandboxes() == []


@pytest.mark.parametrize("closing", [False, True])
async def test_clean_patch_unstages_new_files_unless_the_sandbox_closes_next(
    backend, closing: bool
) -> None:
    task = bundled_task("intervals")
    spec = await EnvConfig().aspec(task, backend)
    async with backend.sandbox(spec) as sb:
        await sb.exec("echo 'X = 1' > brand_new.py && echo '# edited' >> README.md")
        tampered, patch = await clean_patch(sb, task.base_commit, timeout=60, closing=closing)
        assert not tampered
        assert "b/brand_new.py" in patch and "b/README.md" in patch
        staged = (await sb.exec("git diff --cached --name-only")).stdout.split()
        assert ("brand_new.py" in staged) == closing  # a sandbox graded in place sees it untracked
