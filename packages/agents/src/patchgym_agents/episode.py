"""One episode with a :class:`Policy`: the agents runner's adapter over the episode driver.

Outcomes (``EpisodeResult.status``, from :class:`patchgym_agents.driver.Outcome`):
- ``graded``: the environment graded the final repository state (resolved or not),
  also when the wall-clock budget ran out or the context window was full;
- ``infra_error``: the sandbox or the model endpoint failed — the episode says nothing
  about the policy; retry it or mask it, never train on its 0;
- ``error``: the policy itself failed (a refused request, an exhausted script).

The loop, its named ends and the reward/mask rule live in :mod:`patchgym_agents.driver`
(shared with the verl, TRL and rLLM adapters); the driver closes the environment on
every path.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from patchgym_agents.agent import SWEAgent
from patchgym_agents.agent_factory import make_agent
from patchgym_agents.defaults import MODEL_TIMEOUT_S
from patchgym_agents.driver import (
    EndReason,
    EpisodeDriver,
    Outcome,
    Status,
    Timings,
    Turns,
)
from patchgym_agents.envs_api import EnvConfig, Provision, SWEEnv, Task
from patchgym_agents.history import ContextBudget
from patchgym_agents.policies.base import EpisodeContext, Policy
from patchgym_agents.scaffolds import ToolFormat
from patchgym_agents.types import ModelReply, Usage
from patchgym_sandbox import SandboxBackend

__all__ = ["EpisodeResult", "Status", "Timings", "run_episode"]


class EpisodeResult(BaseModel):
    """One finished episode, as written to the trajectories JSONL (one line each)."""

    task_id: str
    sample: int = 0
    attempt: int = 1
    status: Status
    resolved: bool | None = None
    reward: float | None = None
    done_reason: str | None = None
    """The env's word when it ended the episode (``submitted``, ``max_steps``, ...), else
    ``end_reason``'s value."""
    end_reason: EndReason | None = None
    infra_error: str | None = None
    error: str | None = None
    infra_attempts: list[str] = Field(default_factory=list)
    """Infra errors of earlier attempts of this episode (retried)."""
    steps: int = 0
    model_steps: int = 0
    format_errors: int = 0
    usage: Usage = Field(default_factory=Usage)
    timings: Timings = Field(default_factory=Timings)
    patch: str | None = None
    verdict: dict[str, Any] | None = None
    trajectory: dict[str, Any] = Field(default_factory=dict)
    """rLLM field names (``Trajectory.to_rllm``); per-step ``chat_completions`` dropped,
    the final conversation is in ``trajectory.info.messages``."""
    phases: dict[str, float] = Field(default_factory=dict)
    """Seconds per phase (create, setup, generation, tool, grading, close)."""
    sandbox_s: float = 0.0
    """Sandbox-seconds: how long this episode held a sandbox (for cost)."""
    executed_on: str | None = None
    """The host (or Ray node) that ran the episode."""
    finished_at: float = Field(default_factory=time.time)

    @property
    def key(self) -> tuple[str, int]:
        return (self.task_id, self.sample)


async def run_episode(
    task: Task,
    policy: Policy,
    *,
    env: EnvConfig | Mapping[str, Any] | None = None,
    tool_format: ToolFormat | None = None,
    backend: SandboxBackend | None = None,
    budget: ContextBudget | int | None = None,
    sample: int = 0,
    attempt: int = 1,
    model_timeout_s: float | None = None,
    max_turns: int | None = None,
    live: set[SWEEnv] | None = None,
    provision: Provision | None = None,
) -> EpisodeResult:
    """Run ``task`` to the end with ``policy``; never raises for task, policy or infra trouble.

    ``env``: the episode settings (an ``EnvConfig``, passed down as is, or a mapping of its
    fields; None: the defaults). The scaffold and the episode budget are read from it.
    ``model_timeout_s``: one model call's deadline (None: the default, ``MODEL_TIMEOUT_S``);
    ``max_turns``: a turn limit below the env's ``max_steps`` (None: the env's).
    ``provision``: hands the environment its started sandbox (a group or pool claim).
    """
    config = env if isinstance(env, EnvConfig) else EnvConfig.model_validate(dict(env or {}))
    sweenv = SWEEnv(
        task, config=config, backend=backend, idx=f"s{sample}a{attempt}", provision=provision
    )
    agent = make_agent(
        config.scaffold, tool_format=tool_format, budget=budget, workdir=task.workdir
    )
    turns = PolicyTurns(policy, agent, task, sample)
    deadline = MODEL_TIMEOUT_S if model_timeout_s is None else model_timeout_s
    driver = EpisodeDriver(sweenv, agent, max_turns=max_turns, model_timeout_s=deadline)
    if live is not None:
        live.add(sweenv)
    try:
        outcome = await driver.run(turns)
    finally:
        if live is not None:
            live.discard(sweenv)
    return _result(outcome, task, sample, attempt, sweenv, agent, turns.usage)


class PolicyTurns(Turns):
    """The runner's engine part: the next reply comes from a :class:`Policy`."""

    def __init__(self, policy: Policy, agent: SWEAgent, task: Task, sample: int) -> None:
        self.policy = policy
        self.agent = agent
        self.ctx = EpisodeContext(
            task=task, scaffold=agent.scaffold, tool_format=agent.tool_format, sample=sample
        )
        self.usage = Usage()

    async def generate(self) -> ModelReply:
        reply = await self.policy.generate(
            self.agent.chat_completions, tools=self.agent.tools, episode=self.ctx
        )
        self.usage += reply.usage
        return reply


def _result(
    outcome: Outcome,
    task: Task,
    sample: int,
    attempt: int,
    sweenv: SWEEnv,
    agent: SWEAgent,
    usage: Usage,
) -> EpisodeResult:
    """The finished episode (after the environment closed: its phases are complete)."""
    verdict = outcome.verdict
    return EpisodeResult(
        task_id=task.id,
        sample=sample,
        attempt=attempt,
        status=outcome.status,
        resolved=outcome.resolved,
        reward=outcome.reward,
        done_reason=outcome.done_reason,
        end_reason=outcome.end_reason,
        infra_error=outcome.infra_error,
        error=outcome.error,
        steps=outcome.steps,
        model_steps=agent.model_steps,
        format_errors=agent.format_errors,
        usage=usage,
        timings=outcome.timings,
        patch=outcome.patch,
        verdict=verdict.model_dump(mode="json") if verdict is not None else None,
        trajectory=_trajectory(agent),
        phases=sweenv.phases.summary(),
        executed_on=socket.gethostname(),
        sandbox_s=round(sweenv.phases.sandbox_s, 3),
    )


def _trajectory(agent: SWEAgent) -> dict[str, Any]:
    """The rLLM trajectory with the final conversation, without per-step prompts."""
    traj = agent.trajectory
    traj.info.update(agent.stats(), messages=agent.messages)
    dumped = traj.to_rllm()
    for s in dumped["steps"]:
        s.pop("chat_completions", None)
    return dumped
