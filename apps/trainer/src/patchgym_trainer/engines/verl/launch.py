"""``patchgym train`` with verl: data files, the agent-loop config, verl's overrides, the launch.

Our config maps onto verl's ``ppo_trainer`` Hydra config as plain ``key=value`` overrides
(:func:`verl_overrides`; a CPU test composes them against verl's own YAML, so a renamed
key fails in CI, not on the GPU node), plus the sampler that logs ``hack/*`` per training
step (:mod:`.hack_metrics`). The agent loop's settings travel in the
``agent_loop_config_path`` file verl reads (``name``, ``_target_`` and our kwargs).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from omegaconf import OmegaConf
from pydantic import BaseModel
from rich.console import Console

from patchgym_envs import write_verl_parquet
from patchgym_trainer.datasets import load_dataset
from patchgym_trainer.engines.verl.hack_metrics import (
    check_verl_version,
    hack_metrics_off,
    sampler_overrides,
)
from patchgym_trainer.schema import AppConfig

AGENT_LOOP_TARGET = "patchgym_trainer.engines.verl.agent_loop.SWEAgentLoop"
AGENT_NAME = "patchgym_swe"


class TrainFiles(BaseModel):
    train: Path
    val: Path | None
    agent_loop: Path
    checkpoints: Path


def prepare_files(cfg: AppConfig, out_dir: Path) -> TrainFiles:
    """Convert the datasets to verl parquet and write the agent-loop config."""
    out_dir = out_dir.resolve()  # Ray workers do not share our working directory
    out_dir.mkdir(parents=True, exist_ok=True)
    train = write_verl_parquet(
        load_dataset(cfg.dataset).tasks, out_dir / "train.parquet", data_source=cfg.dataset.name
    )
    val = None
    if cfg.val_dataset is not None:
        val = write_verl_parquet(
            load_dataset(cfg.val_dataset).tasks,
            out_dir / "val.parquet",
            data_source=cfg.val_dataset.name,
            split=cfg.val_dataset.split,
        )
    agent_loop = out_dir / "agent_loop.yaml"
    agent_loop.write_text(OmegaConf.to_yaml(OmegaConf.create(agent_loop_entries(cfg))))
    return TrainFiles(
        train=train, val=val, agent_loop=agent_loop, checkpoints=out_dir / "checkpoints"
    )


def agent_loop_entries(cfg: AppConfig) -> list[dict[str, object]]:
    """verl's agent-loop config file: a list of ``{name, _target_, **kwargs}``."""
    env_args = {**cfg.env_node(), "run_id": f"train-{cfg.run.name}"}
    return [
        {
            "name": AGENT_NAME,
            "_target_": AGENT_LOOP_TARGET,
            "env_args": env_args,
            "agent": {"scaffold": cfg.agent.scaffold},
        }
    ]


def verl_overrides(cfg: AppConfig, files: TrainFiles) -> list[str]:
    t, a, m = cfg.train, cfg.algorithm, cfg.model
    val = files.val or files.train
    out = [
        f"data.train_files={files.train}",
        f"data.val_files={val}",
        f"data.train_batch_size={t.train_batch_size}",
        f"data.max_prompt_length={t.max_prompt_length}",
        f"data.max_response_length={t.max_response_length}",
        "data.return_raw_chat=true",
        "data.filter_overlong_prompts=false",
        "data.truncation=left",
        f"data.seed={cfg.run.seed}",
        f"algorithm.adv_estimator={a.adv_estimator}",
        "algorithm.use_kl_in_reward=false",
        f"actor_rollout_ref.model.path={m.path}",
        f"actor_rollout_ref.model.enable_gradient_checkpointing={str(m.enable_gradient_checkpointing).lower()}",
        f"actor_rollout_ref.model.use_remove_padding={str(m.use_remove_padding).lower()}",
        f"actor_rollout_ref.actor.optim.lr={a.lr}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={t.ppo_mini_batch_size}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={t.ppo_micro_batch_size_per_gpu}",
        "actor_rollout_ref.actor.use_dynamic_bsz=true",
        f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={t.ppo_max_token_len_per_gpu}",
        f"actor_rollout_ref.actor.use_kl_loss={str(a.use_kl_loss).lower()}",
        f"actor_rollout_ref.actor.kl_loss_coef={a.kl_coef}",
        f"actor_rollout_ref.actor.kl_loss_type={a.kl_loss_type}",
        f"actor_rollout_ref.actor.entropy_coeff={a.entropy_coeff}",
        f"actor_rollout_ref.rollout.name={t.rollout_engine}",
        "actor_rollout_ref.rollout.mode=async",
        f"actor_rollout_ref.rollout.n={t.rollout_n}",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={t.gpu_memory_utilization}",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={t.tensor_model_parallel_size}",
        f"actor_rollout_ref.rollout.max_model_len={t.max_prompt_length + t.max_response_length}",
        f"actor_rollout_ref.rollout.max_num_batched_tokens={max(8192, t.max_prompt_length + t.max_response_length)}",
        f"actor_rollout_ref.rollout.agent.default_agent_loop={AGENT_NAME}",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={files.agent_loop}",
        f"actor_rollout_ref.rollout.agent.num_workers={max(1, min(8, t.train_batch_size * t.rollout_n))}",
        f"trainer.n_gpus_per_node={t.gpus_per_node}",
        f"trainer.nnodes={t.nodes}",
        f"trainer.total_epochs={t.total_epochs}",
        f"trainer.project_name={t.project_name}",
        f"trainer.experiment_name={cfg.run.name}",
        f"trainer.logger=[{','.join(t.logger)}]",
        f"trainer.val_before_train={str(t.val_before_train).lower()}",
        f"trainer.test_freq={t.test_freq}",
        f"trainer.save_freq={t.save_freq}",
        f"trainer.default_local_dir={files.checkpoints}",
    ]
    if t.total_training_steps is not None:
        out.append(f"trainer.total_training_steps={t.total_training_steps}")
    if a.use_critic:
        out += [
            f"critic.model.path={m.path}",
            f"critic.ppo_micro_batch_size_per_gpu={t.ppo_micro_batch_size_per_gpu}",
            f"critic.ppo_max_token_len_per_gpu={t.ppo_max_token_len_per_gpu}",
        ]
    return out + sampler_overrides(t.extra_overrides) + list(t.extra_overrides)


def launch(cfg: AppConfig, out_dir: Path, console: Console, *, dry_run: bool = False) -> int:
    """Write the files, print the verl command, run it (unless ``dry_run``); returns its status."""
    if cfg.train.engine != "verl":
        from patchgym_trainer.errors import TrainerError

        raise TrainerError(
            "train.engine=rllm: run the rLLM script instead — "
            "python -m patchgym_trainer.engines.rllm.train_v02 (see the trainer README)"
        )
    files = prepare_files(cfg, out_dir)
    argv = [sys.executable, "-m", "verl.trainer.main_ppo", *verl_overrides(cfg, files)]
    (out_dir / "command.sh").write_text(" \\\n  ".join(shlex.quote(a) for a in argv) + "\n")
    console.print(
        f"verl command written to {out_dir / 'command.sh'}", soft_wrap=True, highlight=False
    )
    off = hack_metrics_off(cfg.train.extra_overrides)
    console.print(
        "per-step hack/* metrics: "
        + (f"off ({off})" if off else "on (patchgym's replay-buffer sampler)"),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    if dry_run:
        # soft_wrap: one argument per line, never broken inside (copyable at any width)
        console.print(
            " \\\n  ".join(shlex.quote(a) for a in argv),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return 0
    from patchgym_trainer.engines.verl import require_verl

    require_verl()
    if off is None:
        import verl

        check_verl_version(verl.__version__)
    env = {**os.environ, "HYDRA_FULL_ERROR": "1"}
    return subprocess.call(argv, env=env)
