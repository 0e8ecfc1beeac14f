"""Hostile actions through ``SWEEnv.step``: each is an error observation, quickly, in the same sandbox.

Time is measured but never decides a test's outcome on its own scale: every action gets
a generous ceiling (a quadratic parser took minutes on these inputs), and the sandbox's
identity and the agent's file are what must survive.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from patchgym_envs import SWEEnv, bundled_task

MB = 1024 * 1024


class Hostile:
    """An action object whose attribute access blows up (a buggy or hostile agent)."""

    @property
    def action(self) -> Any:
        raise RuntimeError("boom")


def nested(depth: int) -> dict[str, Any]:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


ACTIONS: list[tuple[str, Any, str]] = [
    ("text-1mb", "<function=execute_bash><parameter=cmd>" + "a" * MB, "65536-byte limit"),
    ("text-50mb", "a=b; " * (10 * MB), "65536-byte limit"),
    ("unclosed-think", "<think>" * (MB // 7), "limit"),
    ("unclosed-function", "<function=" * 6000, "no tool call"),
    ("unclosed-params", "<function=execute_bash>" + "<parameter=cmd>" * 4000, "ERROR"),
    ("binary", "<function=execute_bash><parameter=cmd>\x00\xff\ud800</parameter>", "ERROR"),
    ("deep-json-text", {"name": "execute_bash", "arguments": "[" * 60_000}, "ERROR"),
    ("deep-json-mapping", {"name": "execute_bash", "arguments": nested(5000)}, "nested more than"),
    ("wrong-arg-type", {"name": "execute_bash", "arguments": {"cmd": ["ls", 3]}}, "exit code"),
    ("hostile-object", Hostile(), "could not be read"),
    ("bad-json", {"name": "execute_bash", "arguments": '{"cmd": '}, "not valid JSON"),
]


@pytest.fixture
def env(local_config: dict[str, Any]) -> Any:
    e = SWEEnv(bundled_task("romanum"), sandbox=local_config, max_steps=100)
    e.reset()
    yield e
    e.close()


def test_hostile_actions_keep_the_same_sandbox(env: SWEEnv) -> None:
    obs, _, done, _ = env.step(
        {"name": "execute_bash", "arguments": {"cmd": "echo kept > agent_work.txt"}}
    )
    assert not done
    sandbox = env.sandbox
    assert sandbox is not None
    for name, action, needle in ACTIONS:
        t0 = time.monotonic()
        obs, _, done, _ = env.step(action)
        spent = time.monotonic() - t0
        assert spent < 20, (name, spent)
        assert not done, (name, obs[:200])
        assert needle in obs, (name, obs[:300])
        assert len(obs) < 20_000, name
        assert env.sandbox is sandbox, name
    obs, *_ = env.step({"name": "execute_bash", "arguments": {"cmd": "cat agent_work.txt"}})
    assert obs.strip() == "kept"
    assert env.sandbox is sandbox
    assert env.step({"name": "execute_bash", "arguments": {"cmd": "true"}})[3]["format_errors"] >= 8


def test_limit_is_configurable(local_config: dict[str, Any]) -> None:
    e = SWEEnv(bundled_task("romanum"), sandbox=local_config, max_action_bytes=2048)
    e.reset()
    try:
        obs, *_ = e.step({"name": "execute_bash", "arguments": {"cmd": "echo " + "x" * 3000}})
        assert "2048-byte limit" in obs
        obs, *_ = e.step({"name": "execute_bash", "arguments": {"cmd": "echo small"}})
        assert obs.strip() == "small"
    finally:
        e.close()


def test_lost_sandbox_ends_the_episode_as_infra(env: SWEEnv) -> None:
    env.step({"name": "execute_bash", "arguments": {"cmd": "echo work > w.txt"}})
    sandbox = env.sandbox
    assert sandbox is not None
    env._loop().run(sandbox.close())  # removed from outside (a reaper, an eviction)
    obs, reward, done, info = env.step({"name": "execute_bash", "arguments": {"cmd": "ls"}})
    assert done and info["reward_valid"] is False and info["done_reason"] == "infra_error"
    assert reward == 0.0
    obs, _, done, _ = env.step({"name": "execute_bash", "arguments": {"cmd": "ls"}})
    assert done and "episode is over" in obs
