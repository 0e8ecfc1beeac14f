"""One episode: agent, policy and environment in a loop, always ending graded or marked.

Outcomes (``EpisodeResult.status``):
- ``graded``: the environment graded the final repository state (resolved or not),
  also when the wall-clock budget ran out or the context window was full;
- ``infra_error``: the sandbox or the model endpoint failed — the episode says nothing
  about the policy; retry it or mask it, never train on its 0;
- ``error``: the policy itself failed (a refused request, an exhausted script).

The environment creates its sandbox at the first step and closes it when the episode
ends; :func:`run_episode` closes the environment in ``finally`` on every path.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from patchgym_agents.agent import SWEAgent
from patchgym_agents.agent_factory import make_agent
from patchgym_agents.envs_api import EnvConfig, Provision, SWEEnv, Task
from patchgym_agents.history import ContextBudget
from patchgym_agents.policies.base import (
    ContextLengthExceeded,
    EpisodeContext,
    Policy,
    PolicyError,
    PolicyUnavailable,
)
from patchgym_agents.scaffolds import ToolFormat
from patchgym_agents.types import Action, Usage
from patchgym_sandbox import InfraError, SandboxBackend

Status = Literal["graded", "infra_error", "error"]


class Timings(BaseModel):
    """Seconds per phase of an episode (a rollout summary sums them: ``PhaseTimes``)."""

    model_s: float = 0.0
    """Waiting for the policy."""
    sandbox_s: float = 0.0
    """The first environment step: sandbox creation, task setup and the first tool call."""
    tools_s: float = 0.0
    """The other environment steps except the last."""
    grading_s: float = 0.0
    """The last environment step: its tool call and grading in the sandbox."""
    total_s: float = 0.0


class EpisodeResult(BaseModel):
    """One finished episode, as written to the trajectories JSONL (one line each)."""

    task_id: str
    sample: int = 0
    attempt: int = 1
    status: Status
    resolved: bool | None = None
    reward: float | None = None
    done_reason: str | None = None
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
    model_timeout_s: float = 600.0,
    live: set[SWEEnv] | None = None,
    provision: Provision | None = None,
) -> EpisodeResult:
    """Run ``task`` to the end with ``policy``; never raises for task, policy or infra trouble.

    ``env``: the episode settings (an ``EnvConfig``, passed down as is, or a mapping of its
    fields; None: the defaults). The scaffold and the episode budget are read from it.
    ``provision``: hands the environment its started sandbox (a group or pool claim).
    """
    config = env if isinstance(env, EnvConfig) else EnvConfig.model_validate(dict(env or {}))
    sweenv = SWEEnv(
        task, config=config, backend=backend, idx=f"s{sample}a{attempt}", provision=provision
    )
    agent = make_agent(
        config.scaffold, tool_format=tool_format, budget=budget, workdir=task.workdir
    )
    episode = _Episode(
        task,
        policy,
        sweenv,
        agent,
        sample=sample,
        episode_timeout_s=config.episode_timeout_s,
        model_timeout_s=model_timeout_s,
    )
    if live is not None:
        live.add(sweenv)
    try:
        await episode.play()
    finally:
        try:
            await sweenv.aclose()
        finally:
            if live is not None:
                live.discard(sweenv)
    return episode.result(attempt)


class _Episode:
    """One episode's loop and its bookkeeping: clocks, usage, steps and the outcome so far.

    ``outcome`` holds the result's status fields (``status``, ``infra_error``, ``error``,
    ``done_reason``); ``info`` is the environment's last info (its verdict and patch).
    """

    def __init__(
        self,
        task: Task,
        policy: Policy,
        sweenv: SWEEnv,
        agent: SWEAgent,
        *,
        sample: int,
        episode_timeout_s: float,
        model_timeout_s: float,
    ) -> None:
        self.task = task
        self.policy = policy
        self.sweenv = sweenv
        self.agent = agent
        self.sample = sample
        self.episode_timeout_s = episode_timeout_s
        self.model_timeout_s = model_timeout_s
        self.ctx = EpisodeContext(
            task=task, scaffold=agent.scaffold, tool_format=agent.tool_format, sample=sample
        )
        self.timings = Timings()
        self.usage = Usage()
        self.start = time.monotonic()
        self.outcome: dict[str, Any] = {"status": "graded"}
        self.info: dict[str, Any] = {}
        self.steps = 0

    async def play(self) -> None:
        """Run to the end; task, policy and infra trouble becomes the outcome, not a raise."""
        try:
            await self._loop()
        except InfraError as exc:  # before TimeoutError: CreateTimeout is both
            self.outcome.update(status="infra_error", infra_error=f"{type(exc).__name__}: {exc}")
        except (TimeoutError, ContextLengthExceeded) as exc:
            self.outcome["done_reason"] = (
                "timeout" if isinstance(exc, TimeoutError) else "context_exceeded"
            )
            await self._grade_early_end()
        except PolicyUnavailable as exc:
            self.outcome.update(status="infra_error", infra_error=f"{type(exc).__name__}: {exc}")
        except PolicyError as exc:
            self.outcome.update(status="error", error=f"{type(exc).__name__}: {exc}")

    async def _loop(self) -> None:
        obs, self.info = await self.sweenv.areset()
        self.agent.update_from_env(obs, 0.0, False, self.info)
        done = False
        while not done:
            done = await self._step(await self._generate())
        if self.info.get("infra_error"):
            self.outcome.update(status="infra_error", infra_error=self.info["infra_error"])

    async def _generate(self) -> Action:
        """The policy's next action, within what is left of the episode's budget."""
        remaining = self.episode_timeout_s - (time.monotonic() - self.start)
        if remaining <= 0:
            raise TimeoutError
        t0 = time.monotonic()
        with self.sweenv.phases.phase("generation"):
            reply = await asyncio.wait_for(
                self.policy.generate(
                    self.agent.chat_completions, tools=self.agent.tools, episode=self.ctx
                ),
                min(self.model_timeout_s, remaining),
            )
        self.timings.model_s += time.monotonic() - t0
        self.usage += reply.usage
        return self.agent.update_from_model(reply)

    async def _step(self, action: Action) -> bool:
        """Run ``action`` in the environment; True when the episode is done (and graded)."""
        t0 = time.monotonic()
        obs, reward, done, self.info = await self.sweenv.astep(action)
        took = time.monotonic() - t0
        self.steps += 1
        if self.steps == 1:
            self.timings.sandbox_s += took
        elif done:
            self.timings.grading_s += took
        else:
            self.timings.tools_s += took
        self.agent.update_from_env(obs, reward, done, self.info)
        return done

    async def _grade_early_end(self) -> None:
        """Grade what the agent left behind when time or the context window ran out."""
        sweenv = self.sweenv
        if sweenv.sandbox is None:
            return
        t0 = time.monotonic()
        await sweenv.acompute_final_reward()
        self.timings.grading_s += time.monotonic() - t0
        graded = sweenv.verdict
        if graded is None or graded.infra_error:
            why = graded.infra_error if graded else "grading after the early end failed"
            self.outcome.update(status="infra_error", infra_error=why)
        self.info = {"verdict": graded.model_dump(mode="json")} if graded else {}

    def result(self, attempt: int) -> EpisodeResult:
        """The finished episode (after the environment closed: its phases are complete)."""
        self.timings.total_s = time.monotonic() - self.start
        info, res, sweenv, agent = self.info, self.outcome, self.sweenv, self.agent
        verdict: dict[str, Any] | None = info.get("verdict") or (
            sweenv.verdict.model_dump(mode="json") if sweenv.verdict else None
        )
        if res["status"] == "graded":
            resolved = bool(verdict and verdict.get("resolved"))
            res.update(resolved=resolved, reward=1.0 if resolved else 0.0)
        return EpisodeResult(
            task_id=self.task.id,
            sample=self.sample,
            attempt=attempt,
            done_reason=res.pop("done_reason", info.get("done_reason")),
            steps=self.steps,
            model_steps=agent.model_steps,
            format_errors=agent.format_errors,
            usage=self.usage,
            timings=self.timings,
            patch=info.get("patch"),
            verdict=verdict,
            trajectory=_trajectory(agent),
            phases=sweenv.phases.summary(),
            executed_on=socket.gethostname(),
            sandbox_s=round(sweenv.phases.sandbox_s, 3),
            **res,
        )


def _trajectory(agent: SWEAgent) -> dict[str, Any]:
    """The rLLM trajectory with the final conversation, without per-step prompts."""
    traj = agent.trajectory
    traj.info.update(agent.stats(), messages=agent.messages)
    dumped = traj.to_rllm()
    for s in dumped["steps"]:
        s.pop("chat_completions", None)
    return dumped
