"""Train with rLLM v0.2.x's ``AgentTrainer`` on our env and agent (the DeepSWE seed recipe).

    pip install "rllm @ git+https://github.com/rllm-org/rllm@v0.2.1.post1"
    patchgym datasets register R2E_Gym_Subset dataset=r2e_gym_subset dataset.path=<local copy>
    patchgym datasets register SWE_Bench_Verified dataset=swe_bench_verified dataset.path=<local copy>
    python -m patchgym_trainer.engines.rllm.train_v02 sandbox=k8s          # our overrides, then `--` rLLM's

Our Hydra overrides (``sandbox=...``, ``agent=...``, ``env.max_steps=...``) pick the env
and agent args; every argument after ``--`` is an rLLM/verl override appended to the
seed recipe's (:data:`SEED_OVERRIDES`, from rLLM's ``train_deepswe_32b.sh``).
"""

from __future__ import annotations

import sys
from typing import Any

SEED_OVERRIDES: list[str] = [
    "algorithm.adv_estimator=rloo",
    "data.train_batch_size=8",
    "data.val_batch_size=512",
    "data.max_prompt_length=4096",
    "data.max_response_length=32768",
    "data.filter_overlong_prompts=True",
    "actor_rollout_ref.model.path=Qwen/Qwen3-32B",
    "actor_rollout_ref.hybrid_engine=True",
    "actor_rollout_ref.actor.optim.lr=1e-6",
    "actor_rollout_ref.model.use_remove_padding=True",
    "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum",
    "actor_rollout_ref.actor.ppo_mini_batch_size=8",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=32000",
    "actor_rollout_ref.actor.use_kl_loss=False",
    "actor_rollout_ref.actor.clip_ratio_high=0.28",
    "actor_rollout_ref.actor.kl_loss_coef=0.001",
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size=8",
    "actor_rollout_ref.model.enable_gradient_checkpointing=True",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=8",
    "actor_rollout_ref.rollout.name=vllm",
    "actor_rollout_ref.rollout.mode=async",
    "actor_rollout_ref.rollout.temperature=1.0",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
    "actor_rollout_ref.rollout.n=8",
    "actor_rollout_ref.rollout.val_kwargs.n=1",
    "actor_rollout_ref.rollout.val_kwargs.temperature=0",
    "algorithm.kl_ctrl.kl_coef=0.001",
    "rllm.mask_truncated_samples=False",
    "trainer.critic_warmup=0",
    "trainer.logger=['console','wandb']",
    "trainer.project_name=patchgym",
    "trainer.experiment_name=swe-agent-rl",
    "trainer.val_before_train=False",
    "trainer.n_gpus_per_node=8",
    "trainer.nnodes=8",
    "trainer.save_freq=10",
    "trainer.test_freq=10",
    "rllm.agent.max_steps=50",
    "rllm.agent.overlong_filter=True",
    "trainer.total_epochs=1000",
]
TRAIN_DATASET = "R2E_Gym_Subset"
VAL_DATASET = "SWE_Bench_Verified"


def load_registered(registry: Any, name: str, split: str) -> Any:
    """``DatasetRegistry.load_dataset``, which returns None on a miss: make that an error."""
    dataset = registry.load_dataset(name, split)
    if dataset is None:
        from patchgym_trainer.commands.datasets import legacy_registry_file
        from patchgym_trainer.errors import TrainerError

        where = legacy_registry_file()
        raise TrainerError(
            f"rLLM's DatasetRegistry has no dataset {name!r} split {split!r} (registry: "
            f"{where or 'no rllm package found'}); register it with "
            f"`patchgym datasets register {name} dataset=... dataset.split={split}` "
            "run in the environment where rLLM v0.2 is installed"
        )
    return dataset


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    ours, theirs = (
        (args[: args.index("--")], args[args.index("--") + 1 :]) if "--" in args else (args, [])
    )

    from patchgym_trainer.compose import compose
    from patchgym_trainer.engines.rllm import require_rllm

    cfg = compose(ours)
    require_rllm()
    from rllm.data import DatasetRegistry

    from patchgym_trainer.errors import TrainerError

    try:  # before the trainer import (verl, ray): a missing dataset is the first thing to say
        train = load_registered(DatasetRegistry, TRAIN_DATASET, "train")
        val = load_registered(DatasetRegistry, VAL_DATASET, "test")
    except TrainerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    from rllm.trainer.agent_trainer import AgentTrainer

    from patchgym_trainer.engines.rllm.env_agent import PatchgymSWEAgent, PatchgymSWEEnv

    trainer = AgentTrainer(
        agent_class=PatchgymSWEAgent,
        env_class=PatchgymSWEEnv,
        agent_args={"scaffold": cfg.agent.scaffold, "tool_format": cfg.agent.tool_format},
        env_args=cfg.env_node(),
        config=[*SEED_OVERRIDES, *theirs],
        train_dataset=train,
        val_dataset=val,
    )
    trainer.train()


if __name__ == "__main__":
    main()
