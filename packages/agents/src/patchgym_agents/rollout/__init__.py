"""The rollout runner: ``await rollout(tasks, policy, RolloutConfig(...))``.

Its command line is the trainer's ``patchgym rollout`` (one CLI; the policy, the dataset and
the backend come from its Hydra config).
"""

from patchgym_agents.rollout.config import RolloutConfig
from patchgym_agents.rollout.images import prepare_images
from patchgym_agents.rollout.runner import Executor, default_run_id, episode_kwargs, rollout
from patchgym_agents.rollout.store import SUMMARY, TRAJECTORIES, ResultStore
from patchgym_agents.rollout.summary import PhaseTimes, RolloutSummary, print_summary, summarise

__all__ = [
    "SUMMARY",
    "TRAJECTORIES",
    "Executor",
    "PhaseTimes",
    "ResultStore",
    "RolloutConfig",
    "RolloutSummary",
    "default_run_id",
    "episode_kwargs",
    "prepare_images",
    "print_summary",
    "rollout",
    "summarise",
]
