"""``patchgym train train.engine=trl``: build TRL's ``GRPOTrainer`` from our config and run it.

Our config maps onto ``GRPOConfig`` (:func:`grpo_args`): one optimiser step consumes
``train_batch_size`` prompts × ``rollout_n`` samples (one generation batch, no
gradient accumulation); ``total_training_steps`` bounds the run. The reward is the
environment's verdict, forwarded by :class:`~.rollout.EpisodeRollout` as
``env_reward``. After training the model and tokenizer are saved to
``<out>/checkpoint`` and ``<out>/train_summary.json`` records what a step must show
(rewards, losses, how far the parameters moved, sandboxes left behind).
"""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from rich.console import Console

from patchgym_sandbox import BackendConfig, create_backend
from patchgym_sandbox import labels as L
from patchgym_trainer.datasets import load_dataset
from patchgym_trainer.engines.trl.generate import static_cache_len
from patchgym_trainer.engines.trl.rollout import (
    EpisodeRollout,
    RolloutSettings,
    prompt_messages,
)
from patchgym_trainer.schema import AppConfig


class TrainSummary(BaseModel):
    """What ``<out>/train_summary.json`` holds (the ``train_cpu`` session checks it)."""

    engine: str = "trl"
    steps: int
    losses: list[float]
    rewards: list[float | None]
    resolved: list[bool]
    forced_gold: list[bool]
    infra_errors: list[str]
    hack: list[dict[str, float]] = []
    """The ``hack/*`` metrics of each logged step (see ``patchgym_agents.hack_metrics``)."""
    param_delta: float
    """Largest absolute change of any parameter between the start and the end."""
    checkpoint: str
    run_id: str
    leftover_sandboxes: list[str]
    wall_s: float
    device: str = "cpu"
    """Where the policy trained: ``cpu`` or ``cuda:N (<GPU name>)``."""
    dtype: str = "float32"
    """The policy's parameter dtype while training (``bfloat16`` on GPUs that support it)."""


def env_reward(
    completions: list[Any], env_reward: list[float | None], **_: Any
) -> list[float | None]:
    """The reward TRL sums: the environment's verdict per sample (None: infra-failed)."""
    return list(env_reward)


def use_bf16() -> bool:
    """bf16 where the GPU supports it (Ampere and later); fp32 on CPU."""
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())


def grpo_args(cfg: AppConfig, out_dir: Path) -> Any:
    import torch
    from trl import GRPOConfig  # type: ignore[attr-defined]  # trl's lazy __init__ hides its names from mypy

    t, a = cfg.train, cfg.algorithm
    return GRPOConfig(
        output_dir=str(out_dir / "trl"),
        per_device_train_batch_size=t.train_batch_size * t.rollout_n,
        gradient_accumulation_steps=1,
        num_generations=t.rollout_n,
        max_completion_length=t.max_response_length,
        max_steps=t.total_training_steps or 1,
        num_train_epochs=t.total_epochs,
        learning_rate=a.lr,
        beta=a.kl_coef if a.use_kl_loss else 0.0,
        temperature=cfg.rollout.temperature,
        use_cpu=not torch.cuda.is_available(),
        bf16=use_bf16(),
        seed=cfg.run.seed,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        shuffle_dataset=False,
    )


def rollout_settings(cfg: AppConfig) -> RolloutSettings:
    """What each episode may spend, from ``train.*`` (and how its turns are generated)."""
    t = cfg.train
    return RolloutSettings(
        scaffold=cfg.agent.scaffold,
        max_new_tokens_per_turn=t.max_new_tokens_per_turn,
        max_completion_tokens=t.max_response_length,
        temperature=cfg.rollout.temperature,
        force_gold=t.force_gold_samples,
        num_generations=t.rollout_n,
        static_cache_len=(
            static_cache_len(t.max_prompt_length, t.max_response_length, t.max_new_tokens_per_turn)
            if t.static_cache
            else None
        ),
    )


def launch(cfg: AppConfig, out_dir: Path, console: Console) -> int:
    """Train, save, write the summary; returns 0 (errors raise)."""
    import time

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer  # type: ignore[attr-defined]  # trl's lazy __init__ hides its names from mypy

    started = time.monotonic()
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    tasks = load_dataset(cfg.dataset).tasks
    run_id = f"train-{cfg.run.name}-{uuid.uuid4().hex[:8]}"
    env = cfg.env.model_copy(update={"run_id": run_id})  # the one validated EnvConfig
    tokenizer = AutoTokenizer.from_pretrained(cfg.model.path)
    tokenizer.padding_side = "left"
    dtype = torch.bfloat16 if use_bf16() else torch.float32
    model = AutoModelForCausalLM.from_pretrained(cfg.model.path, dtype=dtype)
    start_params = {n: p.detach().clone() for n, p in model.named_parameters()}
    settings = rollout_settings(cfg)
    rollout = EpisodeRollout(tasks, env=env, settings=settings, tokenizer=tokenizer)
    data = Dataset.from_list([{"prompt": prompt_messages(x, settings.scaffold)} for x in tasks])
    try:
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=env_reward,
            args=grpo_args(cfg, out_dir),
            train_dataset=data,
            processing_class=tokenizer,
            rollout_func=rollout,
        )
        trainer.train()
    finally:
        rollout.close()
    losses = [float(r["loss"]) for r in trainer.state.log_history if "loss" in r]
    ckpt = out_dir / "checkpoint"
    trainer.save_model(str(ckpt))
    tokenizer.save_pretrained(ckpt)
    trained: Any = trainer.model
    delta = max(
        float((p.detach().cpu() - start_params[n]).abs().max())
        for n, p in trained.named_parameters()
    )
    eps = rollout.episodes
    param = next(trained.parameters())
    where = str(param.device)
    if param.device.type == "cuda":
        where += f" ({torch.cuda.get_device_name(param.device)})"
    summary = TrainSummary(
        steps=int(trainer.state.global_step),
        losses=losses,
        rewards=[e.reward for e in eps],
        resolved=[e.resolved for e in eps],
        forced_gold=[e.forced_gold for e in eps],
        infra_errors=[e.infra_error for e in eps if e.infra_error],
        hack=[
            {k: float(v) for k, v in row.items() if k.startswith("hack/")}
            for row in trainer.state.log_history
            if "hack/any" in row
        ],
        param_delta=delta,
        checkpoint=str(ckpt),
        run_id=run_id,
        leftover_sandboxes=leftover_sandboxes(cfg.sandbox, run_id),
        wall_s=round(time.monotonic() - started, 1),
        device=where,
        dtype=str(param.dtype).removeprefix("torch."),
    )
    (out_dir / "train_summary.json").write_text(summary.model_dump_json(indent=2) + "\n")
    loss_txt = ", ".join(f"{x:.4g}" for x in losses)
    console.print(
        f"trl: {summary.steps} optimiser step(s), loss [{loss_txt}], rewards {summary.rewards}, "
        f"max |Δparam| {delta:.3g}, checkpoint {ckpt}, leftover sandboxes "
        f"{len(summary.leftover_sandboxes)}, {summary.wall_s} s on {where} ({summary.dtype})",
        highlight=False,
    )
    if not all(math.isfinite(x) for x in losses):
        console.print("[bold red]non-finite loss[/]")
        return 1
    return 0


def leftover_sandboxes(sandbox: BackendConfig | dict[str, Any], run_id: str) -> list[str]:
    """Sandboxes of this run the backend still lists (all episodes closed theirs: none)."""
    from patchgym_envs.looprunner import LoopRunner

    async def probe() -> list[str]:
        backend = create_backend(sandbox)
        try:
            return [i.id for i in await backend.list_sandboxes({L.RUN_ID: run_id})]
        finally:
            await backend.aclose()

    runner = LoopRunner("patchgym-trl-reap-check")
    try:
        return runner.run(probe())
    finally:
        runner.stop()


def read_summary(out_dir: Path) -> TrainSummary:
    return TrainSummary.model_validate(json.loads((out_dir / "train_summary.json").read_text()))
