"""One home per default: ``conf/config.yaml`` names every key and states no value.

The values live in :mod:`patchgym_trainer.schema` (or in the package that owns the
setting: :mod:`patchgym_agents.defaults`, ``patchgym_envs.EnvConfig``); the YAML lists each
key with ``null`` ("the default") so Hydra accepts ``key=value`` overrides for it.
"""

from __future__ import annotations

import typing
from typing import Any

import yaml
from pydantic import BaseModel

from patchgym_agents import RolloutConfig, Sampling
from patchgym_agents.defaults import CONCURRENCY, MODEL_TIMEOUT_S, TEMPERATURE
from patchgym_envs import EnvConfig
from patchgym_trainer import schema
from patchgym_trainer.compose import CONF_DIR, compose

NODES: dict[str, type[BaseModel]] = {
    "run": schema.RunConfig,
    "ray": schema.RayConfig,
    "validate": schema.ValidateSettings,
    "rollout": schema.RolloutSettings,
    "train": schema.TrainSettings,
}


def config_yaml() -> dict[str, Any]:
    data = yaml.safe_load((CONF_DIR / "config.yaml").read_text())
    assert isinstance(data, dict)
    return data


def test_config_yaml_names_every_key_and_states_no_value() -> None:
    data = config_yaml()
    for node, model in NODES.items():
        assert list(data[node]) == list(model.model_fields), node
        stated = {k: v for k, v in data[node].items() if v is not None}
        assert stated == {}, f"{node}: values belong in patchgym_trainer.schema: {stated}"
    env = data["env"]
    assert set(env) <= set(EnvConfig.model_fields) and all(v is None for v in env.values())


def test_null_means_the_default_for_every_key() -> None:
    """Safe only where no optional key has a non-None default (null could not set it)."""
    for node, model in NODES.items():
        for name, field in model.model_fields.items():
            optional = type(None) in typing.get_args(field.annotation)
            if optional:
                assert field.default is None, f"{node}.{name}: optional with a non-None default"


def test_composed_defaults_are_the_schema_defaults() -> None:
    cfg = compose([])
    for node, model in NODES.items():
        got = getattr(cfg, "validate_" if node == "validate" else node)
        assert got == model(), node
    assert cfg.env.max_steps == EnvConfig().max_steps


def test_shared_defaults_have_one_home() -> None:
    cfg = compose([])
    assert cfg.rollout.model_timeout_s == RolloutConfig().model_timeout_s == MODEL_TIMEOUT_S
    assert cfg.rollout.concurrency == cfg.validate_.concurrency == RolloutConfig().concurrency
    assert RolloutConfig().concurrency == CONCURRENCY
    assert cfg.rollout.temperature == Sampling().temperature == TEMPERATURE
    assert cfg.agent.scaffold == cfg.env.scaffold == EnvConfig().scaffold  # the default group


def test_overrides_still_reach_a_null_key() -> None:
    cfg = compose(["rollout.model_timeout_s=30", "validate.concurrency=2", "run.seed=7"])
    assert cfg.rollout.model_timeout_s == 30 and cfg.validate_.concurrency == 2
    assert cfg.run.seed == 7
