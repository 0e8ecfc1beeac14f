"""Every preset and every group option composes and validates; bad input names key and choices."""

from __future__ import annotations

import pytest

from patchgym_envs import EnvConfig
from patchgym_trainer.compose import GROUPS, compose, group_options
from patchgym_trainer.errors import ConfigError

FILE_OK = ["dataset.path=tasks.jsonl"]


@pytest.mark.parametrize("preset", group_options("preset"))
def test_every_preset_composes(preset: str) -> None:
    cfg = compose([f"preset={preset}"])
    assert cfg.run.name == preset


@pytest.mark.parametrize(
    ("group", "option"),
    [(g, o) for g in GROUPS if g != "preset" for o in group_options(g)],
)
def test_every_group_option_composes(group: str, option: str) -> None:
    extra = []
    if (group, option) == ("dataset", "file"):
        extra = FILE_OK
    if (group, option) == ("model", "local"):
        extra = ["model.path=/models/x"]
    cfg = compose([f"{group}={option}", *extra])
    node = getattr(cfg, group)
    assert (node.type if group == "sandbox" else node.name) in (
        option,
        "debug_gym",
        option.replace("_", "-"),
    )


def test_default_is_bundled_on_local() -> None:
    cfg = compose([])
    assert cfg.sandbox.type == "local" and cfg.env.sandbox is cfg.sandbox
    assert cfg.dataset.source == "bundled"
    assert cfg.validate_.patches == ["gold", "empty"]


def test_ags_swebench_recipe() -> None:
    cfg = compose(["preset=ags_swebench"])
    t = cfg.train
    assert cfg.algorithm.adv_estimator == "rloo"
    assert cfg.algorithm.kl_coef == 0.001
    assert (t.train_batch_size, t.rollout_n, t.max_response_length) == (4, 4, 32768)
    assert (t.gpu_memory_utilization, t.gpus_per_node, t.total_epochs) == (0.5, 8, 2)
    assert cfg.dataset.name == "r2e_gym_subset" and cfg.dataset.sort_by_image
    assert cfg.val_dataset is not None and cfg.val_dataset.name == "swe_bench_lite"
    assert cfg.sandbox.type == "ags"


def test_smoke_preset_is_one_gpu_two_steps() -> None:
    cfg = compose(["preset=smoke"])
    assert cfg.train.gpus_per_node == 1 and cfg.train.total_training_steps == 2


def test_command_line_beats_preset() -> None:
    cfg = compose(["preset=ags_swebench", "algorithm=grpo", "train.rollout_n=8"])
    assert cfg.algorithm.name == "grpo" and cfg.train.rollout_n == 8


def test_overrides_from_the_issue() -> None:
    cfg = compose(["sandbox=docker", "dataset=file", "dataset.path=x.jsonl"])
    assert cfg.sandbox.type == "docker" and cfg.dataset.path == "x.jsonl"


@pytest.mark.parametrize(
    ("overrides", "needles"),
    [
        (["sandbox=dockr"], ["sandbox", "'dockr'", "docker", "k8s", "local", "ags"]),
        (["preset=nope"], ["preset", "ags_swebench", "smoke"]),
        (["dataset=file"], ["dataset.path", "required"]),
        (["agent.scaffold=swe"], ["agent.scaffold", "r2egym", "sweagent", "debug-gym"]),
        (["algorithm.name=dpo"], ["algorithm.name", "grpo", "rloo", "ppo"]),
        (["train.rollout_n=0"], ["train.rollout_n", "greater than 0"]),
        (["train.nodez=1"], ["unknown config key train.nodez", "did you mean `train.nodes`?"]),
        (["+train.nodez=1"], ["unknown config key train.nodez", "allowed under train: "]),
        (["train.logger=[console,tensorbord]"], ["train.logger", "wandb"]),
    ],
)
def test_config_errors_name_key_and_choices(overrides: list[str], needles: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        compose(overrides)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


@pytest.mark.parametrize("plus", ["", "+"])
def test_a_key_the_yaml_leaves_out_but_the_backend_takes_is_set_as_written(plus: str) -> None:
    """``sandbox.state_dir`` is a field of the local backend's config that its YAML does
    not set: without ``+`` Hydra refused it (and the message suggested the same key)."""
    cfg = compose(["sandbox=local", f"{plus}sandbox.state_dir=/srv/pg", "sandbox.max_starting=4"])
    assert str(cfg.sandbox.state_dir) == "/srv/pg"  # type: ignore[union-attr]  # the local config
    assert cfg.sandbox.max_starting == 4
    with pytest.raises(ConfigError, match=r"did you mean `sandbox\.state_dir`"):
        compose(["sandbox=local", "sandbox.state_dri=/srv/pg"])


def test_one_env_object_holds_the_sandbox_and_scaffold() -> None:
    cfg = compose(["sandbox=docker", "agent=sweagent", "env.step_timeout_s=30"])
    assert cfg.env.sandbox is cfg.sandbox and cfg.sandbox.type == "docker"
    assert cfg.env.scaffold == cfg.agent.scaffold == "sweagent"
    assert cfg.env.step_timeout_s == 30 and cfg.env.max_steps == EnvConfig().max_steps
    assert cfg.env_node()["sandbox"]["type"] == "docker"
