"""The rollout runner: ``await rollout(tasks, policy, RolloutConfig(...))``.

CLI: ``python -m patchgym_agents.rollout --help``.
"""

from patchgym_agents.rollout.config import RolloutConfig
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
    "print_summary",
    "rollout",
    "summarise",
]
