"""EnvConfig: the sandbox node validated once into its backend class; one object end to end."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from patchgym_envs import EnvConfig, SWEEnv
from patchgym_envs.tools import ToolSettings
from patchgym_sandbox.local.config import LocalConfig


def test_sandbox_node_becomes_the_backend_config() -> None:
    cfg = EnvConfig(sandbox={"type": "local", "isolation": False})
    assert isinstance(cfg.sandbox, LocalConfig)
    assert (
        cfg.model_dump()["sandbox"]["isolation"] == "none"
    )  # subclass fields kept (False means none)
    with pytest.raises(ValidationError, match="unknown sandbox backend 'k8'"):
        EnvConfig(sandbox={"type": "k8"})
    with pytest.raises(ValidationError, match="isolatoin"):
        EnvConfig(sandbox={"type": "local", "isolatoin": True})


def test_env_keeps_the_object_it_is_given() -> None:
    cfg = EnvConfig(step_timeout_s=7)
    assert SWEEnv(config=cfg).config is cfg
    merged = SWEEnv(config=cfg, max_steps=3).config
    assert merged.max_steps == 3 and merged.step_timeout_s == 7 and merged.sandbox is cfg.sandbox


def test_tool_settings_share_names_and_defaults() -> None:
    env, tools = EnvConfig(), ToolSettings()
    assert tools.step_timeout_s == env.step_timeout_s
    assert tools.max_observation_chars == env.max_observation_chars


def test_node_reveals_secrets_for_another_process() -> None:
    pytest.importorskip("patchgym_ags")
    cfg = EnvConfig(sandbox={"type": "ags", "api_key": "sk-1"})
    assert "sk-1" not in repr(cfg.model_dump())
    assert cfg.sandbox.node()["api_key"] == "sk-1"
    assert EnvConfig(sandbox=cfg.sandbox.node()).sandbox == cfg.sandbox
