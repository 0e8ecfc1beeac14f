"""Preflight rules that need nothing but the config (pure functions, table-tested)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel

from patchgym_sandbox import BackendConfig
from patchgym_trainer.schema import TrainSettings

Status = Literal["pass", "fail", "warn", "skip"]


class Check(BaseModel):
    """One row of the preflight table."""

    name: str
    status: Status
    detail: str
    fix: str = ""

    @property
    def blocking(self) -> bool:
        return self.status == "fail"


def token_budget(train: TrainSettings) -> Check:
    """verl packs one sequence per GPU at least: the budget must hold prompt + response."""
    need = train.max_prompt_length + train.max_response_length
    have = train.ppo_max_token_len_per_gpu
    if have > need:
        return Check(
            name="token budget",
            status="pass",
            detail=f"ppo_max_token_len_per_gpu {have} > prompt {train.max_prompt_length} + response {train.max_response_length} = {need}",
        )
    return Check(
        name="token budget",
        status="fail",
        detail=f"ppo_max_token_len_per_gpu {have} <= max prompt + max response = {need}",
        fix=f"train.ppo_max_token_len_per_gpu={need + 1024} (or lower train.max_response_length)",
    )


def batch_divisibility(train: TrainSettings) -> Check:
    """verl splits train_batch_size × rollout.n sequences evenly over every GPU."""
    world = train.gpus_per_node * train.nodes
    seqs = train.train_batch_size * train.rollout_n
    detail = f"train_batch_size {train.train_batch_size} × rollout.n {train.rollout_n} = {seqs} over {train.gpus_per_node} GPUs × {train.nodes} nodes = {world}"
    if seqs % world != 0:
        good = world // math.gcd(world, train.rollout_n)
        return Check(
            name="batch divisibility",
            status="fail",
            detail=detail + f" leaves {seqs % world}",
            fix=f"make train.train_batch_size a multiple of {good} (e.g. {good * max(1, round(train.train_batch_size / good))})",
        )
    if train.ppo_mini_batch_size > train.train_batch_size:
        return Check(
            name="batch divisibility",
            status="fail",
            detail=f"ppo_mini_batch_size {train.ppo_mini_batch_size} > train_batch_size {train.train_batch_size}",
            fix=f"train.ppo_mini_batch_size={train.train_batch_size}",
        )
    if train.train_batch_size % train.ppo_mini_batch_size != 0:
        return Check(
            name="batch divisibility",
            status="fail",
            detail=f"train_batch_size {train.train_batch_size} is not a multiple of ppo_mini_batch_size {train.ppo_mini_batch_size}",
            fix=f"train.ppo_mini_batch_size={train.train_batch_size}",
        )
    return Check(name="batch divisibility", status="pass", detail=detail + " divides evenly")


def tensor_parallel(train: TrainSettings) -> Check:
    if train.gpus_per_node % train.tensor_model_parallel_size != 0:
        return Check(
            name="tensor parallel",
            status="fail",
            detail=f"tensor_model_parallel_size {train.tensor_model_parallel_size} does not divide gpus_per_node {train.gpus_per_node}",
            fix="set train.tensor_model_parallel_size to a divisor of train.gpus_per_node",
        )
    return Check(
        name="tensor parallel",
        status="pass",
        detail=f"TP {train.tensor_model_parallel_size} divides {train.gpus_per_node} GPUs per node",
    )


def sandbox_budget(
    train: TrainSettings,
    sandbox: BackendConfig,
    *,
    train_rows: int | None,
    val_rows: int | None,
) -> Check:
    """Sandboxes the run will create and their hours, against the backend's limits."""
    if train_rows is None:
        return Check(
            name="sandboxes to create",
            status="skip",
            detail="dataset did not load, so the count is unknown",
            fix="fix the dataset check first",
        )
    epochs_rows = train_rows * train.total_epochs
    if train.total_training_steps is not None:
        epochs_rows = min(epochs_rows, train.total_training_steps * train.train_batch_size)
    count = epochs_rows * train.rollout_n
    val_count = 0
    if val_rows and train.test_freq > 0:
        steps = max(1, epochs_rows // train.train_batch_size)
        val_count = val_rows * (steps // train.test_freq + int(train.val_before_train))
    elif val_rows and train.val_before_train:
        val_count = val_rows
    total = count + val_count
    hours = total * train.expected_episode_s / 3600
    peak = train.train_batch_size * train.rollout_n
    limit = sandbox.max_concurrency
    detail = (
        f"{train_rows} rows × {train.total_epochs} epochs × rollout.n {train.rollout_n} = {count}"
        + (f" + {val_count} validation" if val_count else "")
        + f" = {total} sandboxes, ~{hours:,.1f} sandbox-hours at {train.expected_episode_s:.0f} s each; "
        + f"peak {peak} at once"
    )
    rate = sandbox.create_rate()
    if rate:
        detail += f"; creating a step's {peak} takes ≥ {peak / rate:.1f} s at {rate}/s"
    if isinstance(limit, int) and peak > limit:
        return Check(
            name="sandboxes to create",
            status="fail",
            detail=detail + f" > backend max_concurrency {limit}",
            fix=f"lower train.train_batch_size × train.rollout_n to ≤ {limit}, or raise sandbox.max_concurrency if your quota allows",
        )
    suffix = f" (backend max_concurrency {limit})" if limit is not None else ""
    return Check(name="sandboxes to create", status="pass", detail=detail + suffix)
