"""rLLM's ``SWEEnv`` constructor spellings, unknown keys, and malformed actions (not steps)."""

from __future__ import annotations

from typing import Any

import pytest

from patchgym_envs import SWEEnv, bundled_task
from patchgym_envs.errors import EnvConfigError
from patchgym_sandbox import BackendNotInstalled
from patchgym_sandbox.registry import available_backends


@pytest.mark.parametrize(
    ("backend", "kind"),
    [("docker", "docker"), ("kubernetes", "k8s"), ("local", "local"), ("ags", "ags")],
)
def test_backend_spellings_become_the_sandbox_type(backend: str, kind: str) -> None:
    row = {**bundled_task("romanum").to_row(), "backend": backend}
    if kind not in available_backends():  # the spelling maps, then names the missing package
        with pytest.raises(BackendNotInstalled, match=f"patchgym-sandbox-{kind}"):
            SWEEnv(bundled_task("romanum"), backend=backend)
        with pytest.raises(BackendNotInstalled, match=f"patchgym-sandbox-{kind}"):
            SWEEnv.from_dict(row)
        return
    env = SWEEnv(bundled_task("romanum"), backend=backend)
    assert env.config.sandbox.type == kind
    assert SWEEnv.from_dict(row).config.sandbox.type == kind


def test_rllm_arguments_map_onto_our_settings() -> None:
    task = bundled_task("romanum").to_row()
    env = SWEEnv(entry=task, step_timeout=7, reward_timeout=60, verbose=True, delete_image=False)
    assert env.config.step_timeout_s == 7.0 and env.task is not None
    assert env.task.eval_timeout == 60.0 and env.verbose is True
    merged = SWEEnv.from_dict({**task, "step_timeout": 5, "reward_timeout": 30, "verbose": False})
    assert merged.config.step_timeout_s == 5.0 and merged.task is not None
    assert merged.task.eval_timeout == 30.0
    assert SWEEnv(dataset=[task], idx=0).task == env.task.model_copy(
        update={"eval_timeout": bundled_task("romanum").eval_timeout}
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"stepp_timeout": 3}, "stepp_timeout"),
        ({"backend": "kube"}, "unknown backend 'kube'"),
        ({"delete_image": True}, "delete_image=True"),
        ({"backend": "docker", "sandbox": {"type": "local"}}, "conflicts"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(EnvConfigError, match=match):
        SWEEnv(bundled_task("romanum"), **kwargs)


def test_misspelt_key_in_a_merged_row_is_named() -> None:
    with pytest.raises(EnvConfigError, match="'reward_timout'"):
        SWEEnv.from_dict({**bundled_task("romanum").to_row(), "reward_timout": 3})


def test_a_malformed_action_is_not_a_step(tmp_path) -> None:
    sandbox = {"type": "local", "state_dir": str(tmp_path)}
    env = SWEEnv(bundled_task("romanum"), sandbox=sandbox, max_steps=2)
    env.reset()
    try:
        _, _, done, info = env.step("no tool call here")
        assert not done and info["step"] == 0 and info["format_errors"] == 1
        _, _, done, info = env.step({"name": "execute_bash", "arguments": {"cmd": "true"}})
        assert not done and info["step"] == 1
        _, _, done, info = env.step("still nothing")  # max_steps malformed replies end it
        assert done and info["done_reason"] == "max_steps" and info["reward_valid"] is True
    finally:
        env.close()
