"""``train.engine=trl``: TRL's ``GRPOTrainer`` driving :class:`patchgym_envs.SWEEnv` on CPU.

The second, documented engine next to verl (which has no CPU path for a training step,
see the trainer README). TRL owns the training loop (advantages, loss, optimiser,
checkpoints); we own only its multi-turn rollout hook (``rollout_func``): one graded
episode per sample, in a real sandbox, with the model's tokens masked 1 and the
environment's observation tokens masked 0.
"""

from __future__ import annotations

from patchgym_trainer.errors import TrainerError


def require_trl() -> None:
    """Raise a one-line error naming the extra when TRL (or torch) is not installed."""
    try:
        import torch  # noqa: F401
        import trl  # noqa: F401
    except ImportError as exc:
        raise TrainerError(
            f"train.engine=trl needs TRL and torch ({exc.name} is missing): "
            "uv sync --package patchgym-trainer --extra cpu"
        ) from exc
