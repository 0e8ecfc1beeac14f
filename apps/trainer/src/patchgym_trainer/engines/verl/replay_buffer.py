"""verl 0.9.1's V1 replay buffers, plus the sampled batch's ``hack/*`` rates in their metrics.

Written against verl 0.9.1 (``verl/trainer/ppo/v1/replay_buffer.py``; importing this
module checks the version). verl loads a custom sampler named by
``trainer.v1.sampler.custom_sampler.{path,name}`` (the hook ``ReplayBuffer.sample``'s
docstring documents) in its trainer and merges the metrics ``sample`` returns into the
step's logged metrics (``PPOTrainer._step_once`` -> ``step`` -> ``fit``). Ours samples
exactly as verl's own (``ReplayBuffer`` for ``trainer_mode=sync``, ``ReplayBufferAsync``
otherwise), then reads the chosen samples' ``extra_fields`` from the TransferQueue (as
verl's DAPO filter does) and adds :func:`.hack_metrics.step_hack_metrics`. The launcher
selects it (:func:`.hack_metrics.sampler_overrides`).
"""

from __future__ import annotations

from typing import Any

import transfer_queue as tq
import verl
from transfer_queue.metadata import KVBatchMeta
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync

from patchgym_trainer.engines.verl.hack_metrics import check_verl_version, step_hack_metrics

check_verl_version(verl.__version__)


def with_hack_metrics(batch: KVBatchMeta, metrics: dict[str, Any]) -> dict[str, Any]:
    """``metrics`` plus the hack rates of ``batch`` (a training batch; validation is left be:
    verl drops its sampler metrics and reports hack rates itself, as ``val-aux/...``)."""
    if batch.partition_id == "val" or not batch.keys:
        return metrics
    data = tq.kv_batch_get(
        keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"]
    )
    return {**metrics, **step_hack_metrics(data["extra_fields"])}


def _check_mode(trainer_mode: str, *, is_async: bool) -> None:
    """verl samples ``sync`` with ``ReplayBuffer`` and every other mode with the async one."""
    if (trainer_mode != "sync") != is_async:
        ours, verls = ("HackMetricsReplayBuffer", "ReplayBuffer")
        if trainer_mode != "sync":
            ours, verls = ours + "Async", verls + "Async"
        raise ValueError(
            f"trainer.v1.trainer_mode={trainer_mode} samples with verl's {verls}: set "
            f"trainer.v1.sampler.custom_sampler.name={ours}"
        )


class HackMetricsReplayBuffer(ReplayBuffer):
    """verl's sync ``ReplayBuffer`` whose ``sample`` also reports ``hack/*``."""

    def __init__(self, *, trainer_mode: str, **kwargs: Any) -> None:
        _check_mode(trainer_mode, is_async=False)
        super().__init__(trainer_mode=trainer_mode, **kwargs)

    def sample(
        self, global_steps: int, partition_id: str, batch_size: int
    ) -> tuple[KVBatchMeta, dict[str, Any]]:
        batch, metrics = super().sample(global_steps, partition_id, batch_size)
        return batch, with_hack_metrics(batch, metrics)


class HackMetricsReplayBufferAsync(ReplayBufferAsync):
    """verl's ``ReplayBufferAsync`` (both async modes) whose ``sample`` also reports ``hack/*``."""

    def __init__(self, *, trainer_mode: str, **kwargs: Any) -> None:
        _check_mode(trainer_mode, is_async=True)
        super().__init__(trainer_mode=trainer_mode, **kwargs)

    def sample(
        self, global_steps: int, partition_id: str, batch_size: int
    ) -> tuple[KVBatchMeta, dict[str, Any]]:
        batch, metrics = super().sample(global_steps, partition_id, batch_size)
        return batch, with_hack_metrics(batch, metrics)
