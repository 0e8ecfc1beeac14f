"""The one episode loop: every engine's adapter runs it, so they cannot disagree.

An adapter (the agents runner, verl's agent loop, the TRL rollout, the rLLM workflow)
supplies only what differs between engines, a :class:`Turns`: how the next reply is
generated (a policy, a token server, a local model) and what to do with the tokens of an
observation. :class:`EpisodeDriver` does the rest, one state at a time::

    START -> GENERATE -> STEP -> GENERATE -> ... -> GRADE -> END

- START: ``env.areset()``; the agent renders the first prompt.
- GENERATE: ``turns.generate()`` within what is left of the episode's budget; ``None``
  means the engine's token budget is spent (:attr:`EndReason.MAX_TOKENS`).
- STEP: the agent parses the reply, the env runs the action (typed as :class:`EnvStep`).
- GRADE: when the env did not end the episode itself (a turn/token/time/context cutoff),
  the tests run on what the agent left (``env.acompute_final_reward``).
- END: the env is closed; :meth:`EpisodeDriver.run` returns the :class:`Outcome`.

**One rule for reward vs mask**: an episode that ended on infrastructure (an
``InfraError`` or ``SandboxClosed`` anywhere, a verdict with ``infra_error``, an
unreachable model) or on a policy failure has ``reward=None``: it is masked, never scored
as a 0. Every other end is graded and its reward is the env's (the verdict's, or its
shaped reward when one is configured).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from patchgym_agents.envs_api import HackFlag, SWEEnv, Verdict
from patchgym_agents.policies.base import ContextLengthExceeded, PolicyError, PolicyUnavailable
from patchgym_agents.types import Action, ModelReply
from patchgym_sandbox import InfraError, SandboxClosed


class EndReason(StrEnum):
    """Why an episode ended (one enum for every engine)."""

    SUBMITTED = "submitted"
    """The agent submitted (or finished); graded."""
    MAX_TURNS = "max_turns"
    """The step limit (the env's ``max_steps`` or the engine's turn limit); graded."""
    MAX_TOKENS = "max_tokens"
    """The engine's response-token budget is spent; graded."""
    CONTEXT_EXCEEDED = "context_exceeded"
    """The model's context window is full; graded."""
    TIMEOUT = "timeout"
    """The episode's wall-clock budget (or one model call's deadline) ran out; graded."""
    FORMAT_ERROR = "format_error"
    """The step limit was reached without one well-formed action; graded."""
    INFRA = "infra"
    """The sandbox, the grader or the model endpoint failed: masked."""
    POLICY_ERROR = "policy_error"
    """The policy itself failed (a refused request, an exhausted script): masked."""


MASKED = frozenset({EndReason.INFRA, EndReason.POLICY_ERROR})
"""Ends whose reward says nothing about the policy: ``Outcome.reward`` is None."""


class State(StrEnum):
    START = "start"
    GENERATE = "generate"
    STEP = "step"
    GRADE = "grade"
    END = "end"


_ENV_ENDS: dict[str, EndReason] = {
    "submitted": EndReason.SUBMITTED,
    "max_steps": EndReason.MAX_TURNS,
    "timeout": EndReason.TIMEOUT,
    "infra_error": EndReason.INFRA,
    "closed": EndReason.INFRA,
}


def infra_error_of(info: Mapping[str, Any] | None) -> str | None:
    """The infrastructure failure an env ``info`` reports, or None for a task outcome."""
    if not info:
        return None
    err = info.get("infra_error")
    if err:
        return str(err)
    if info.get("reward_valid") is False:
        return "reward_valid=False"
    return None


@dataclass(frozen=True)
class EnvStep:
    """What one ``env.astep`` said, typed (``info`` keeps the raw mapping for rLLM)."""

    observation: str
    reward: float
    done: bool
    done_reason: str | None = None
    infra_error: str | None = None
    steps: int = 0
    """Well-formed actions the env has run so far (malformed ones are not steps)."""
    format_errors: int = 0
    patch: str | None = None
    info: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, observation: Any, reward: float, done: bool, info: Mapping[str, Any]) -> EnvStep:
        return cls(
            observation=observation if isinstance(observation, str) else str(observation),
            reward=float(reward),
            done=bool(done),
            done_reason=info.get("done_reason"),
            infra_error=infra_error_of(info),
            steps=int(info.get("step") or 0),
            format_errors=int(info.get("format_errors") or 0),
            patch=info.get("patch"),
            info=dict(info),
        )


class Timings(BaseModel):
    """Seconds per phase of an episode (a rollout summary sums them: ``PhaseTimes``)."""

    model_s: float = 0.0
    """Waiting for the policy."""
    sandbox_s: float = 0.0
    """The first environment step: sandbox creation, task setup and the first tool call."""
    tools_s: float = 0.0
    """The other environment steps except the last."""
    grading_s: float = 0.0
    """The last environment step (or the grading after a cutoff): grading in the sandbox."""
    total_s: float = 0.0


Status = Literal["graded", "infra_error", "error"]


@dataclass
class Outcome:
    """How an episode ended and what it is worth (``reward=None``: masked)."""

    end_reason: EndReason
    reward: float | None
    verdict: Verdict | None = None
    """The grading result as the grader returned it (every flag it carries)."""
    patch: str | None = None
    infra_error: str | None = None
    error: str | None = None
    turns: int = 0
    """Model turns (replies generated)."""
    steps: int = 0
    """Environment steps (``env.astep`` calls)."""
    format_errors: int = 0
    env_done_reason: str | None = None
    """The env's own ``done_reason`` when the env ended the episode."""
    last: EnvStep | None = None
    timings: Timings = field(default_factory=Timings)

    @property
    def masked(self) -> bool:
        return self.reward is None

    @property
    def resolved(self) -> bool | None:
        """True/False for a graded episode, None for a masked one."""
        if self.masked:
            return None
        return bool(self.verdict is not None and self.verdict.resolved)

    @property
    def status(self) -> Status:
        if self.end_reason is EndReason.INFRA:
            return "infra_error"
        if self.end_reason is EndReason.POLICY_ERROR:
            return "error"
        return "graded"

    @property
    def done_reason(self) -> str:
        """The trajectory file's ``done_reason``: the env's word when the env ended it."""
        return self.env_done_reason or self.end_reason.value

    @property
    def hack_flags(self) -> tuple[str, ...]:
        """What the episode tried (the verdict's ``HackFlag`` values); none when masked."""
        if self.masked or self.verdict is None:
            return ()
        return tuple(str(f) for f in self.verdict.flags)

    def hack_fields(self) -> dict[str, float]:
        """This episode's share of :func:`hack_metrics` (see :func:`hack_fields`)."""
        return hack_fields(self.hack_flags)


HACK_PREFIX = "hack/"
HACK_ANY = "hack/any"


class Flagged(Protocol):
    """An episode as :func:`hack_metrics` reads it (an :class:`Outcome`, an engine's sample)."""

    @property
    def masked(self) -> bool: ...

    @property
    def hack_flags(self) -> Sequence[str]: ...


def hack_fields(flags: Collection[str]) -> dict[str, float]:
    """``hack/<flag>`` = 1.0 or 0.0 for every known flag, and ``hack/any``: one sample's
    values, with the same keys every time (so an engine's batches line up)."""
    have = {str(f) for f in flags}
    out = {f"{HACK_PREFIX}{flag}": float(str(flag) in have) for flag in HackFlag}
    out[HACK_ANY] = float(bool(have))
    return out


def hack_metrics(episodes: Iterable[Flagged]) -> dict[str, float]:
    """Per training step: ``hack/<flag>`` = the share of graded (unmasked) episodes whose
    verdict carries the flag, ``hack/any`` = the share with any flag (0.0 when none was
    graded). Every engine logs exactly this (the rollout report shows the same rates)."""
    graded = [hack_fields(e.hack_flags) for e in episodes if not e.masked]
    keys = list(hack_fields(()))
    return {k: sum(g[k] for g in graded) / len(graded) if graded else 0.0 for k in keys}


Reply = str | ModelReply


class Agent(Protocol):
    """What the driver needs of an agent (``SWEAgent``, rLLM's ``BaseAgent`` adapter)."""

    def update_from_env(
        self, observation: Any, reward: float, done: bool, info: dict[str, Any], **kw: Any
    ) -> None: ...

    def update_from_model(self, response: Any, **kw: Any) -> Any: ...


class Turns:
    """The engine's part of an episode; subclass and override :meth:`generate`."""

    async def generate(self) -> Reply | None:
        """The next reply; None when the engine's token budget is spent (ends MAX_TOKENS)."""
        raise NotImplementedError

    async def acted(self, action: Action | Any) -> None:
        """After the agent read the reply, before the env runs it."""

    async def observed(self, step: EnvStep) -> None:
        """After a step that did not end the episode (the observation is in the agent)."""


class EpisodeDriver:
    """Runs one episode of ``env`` with ``agent`` (see the module docstring).

    ``max_turns``: the engine's turn limit (None: the env's ``max_steps`` decides);
    ``timeout_s``: the episode's wall-clock budget for generation (None: the env's
    ``episode_timeout_s``); ``model_timeout_s``: one model call's deadline (None: none).
    The env is closed when :meth:`run` returns, on every path.
    """

    def __init__(
        self,
        env: SWEEnv,
        agent: Agent,
        *,
        max_turns: int | None = None,
        timeout_s: float | None = None,
        model_timeout_s: float | None = None,
    ) -> None:
        self.env = env
        self.agent = agent
        self.max_turns = max_turns
        self.timeout_s = env.config.episode_timeout_s if timeout_s is None else timeout_s
        self.model_timeout_s = model_timeout_s
        self.state = State.START
        self.timings = Timings()
        self.turns = 0
        self.steps = 0
        self.last: EnvStep | None = None
        self._start = time.monotonic()

    async def run(self, turns: Turns) -> Outcome:
        try:
            outcome = await self._run(turns)
        finally:
            await self.env.aclose()
            self.state = State.END
            self.timings.total_s = time.monotonic() - self._start
        return outcome

    async def _run(self, turns: Turns) -> Outcome:
        try:
            reason = await self._loop(turns)
        except (InfraError, SandboxClosed, PolicyUnavailable) as exc:
            # InfraError before TimeoutError: CreateTimeout is both
            return self._outcome(EndReason.INFRA, None, infra_error=_describe(exc))
        except TimeoutError:
            reason = EndReason.TIMEOUT
        except ContextLengthExceeded:
            reason = EndReason.CONTEXT_EXCEEDED
        except PolicyError as exc:
            return self._outcome(EndReason.POLICY_ERROR, None, error=_describe(exc))
        return await self._end(reason)

    async def _loop(self, turns: Turns) -> EndReason | None:
        """Play until the env ends the episode (None) or a cutoff does (its reason)."""
        obs, info = await self.env.areset()
        self.agent.update_from_env(obs, 0.0, False, info)
        while self.max_turns is None or self.turns < self.max_turns:
            self.state = State.GENERATE
            reply = await self._generate(turns)
            if reply is None:
                return EndReason.MAX_TOKENS
            self.turns += 1
            self.state = State.STEP
            action = self.agent.update_from_model(reply)
            await turns.acted(action)
            step = await self._step(action)
            if step.done:
                return None
            await turns.observed(step)
        return EndReason.MAX_TURNS

    async def _generate(self, turns: Turns) -> Reply | None:
        remaining = self.timeout_s - (time.monotonic() - self._start)
        if remaining <= 0:
            raise TimeoutError
        deadline = (
            remaining if self.model_timeout_s is None else min(self.model_timeout_s, remaining)
        )
        t0 = time.monotonic()
        try:
            with self.env.phases.phase("generation"):
                return await asyncio.wait_for(turns.generate(), deadline)
        finally:
            self.timings.model_s += time.monotonic() - t0

    async def _step(self, action: Any) -> EnvStep:
        t0 = time.monotonic()
        step = EnvStep.of(*await self.env.astep(action))
        took = time.monotonic() - t0
        self.steps += 1
        if self.steps == 1:
            self.timings.sandbox_s += took
        elif step.done:
            self.timings.grading_s += took
        else:
            self.timings.tools_s += took
        self.last = step
        self.agent.update_from_env(step.observation, step.reward, step.done, dict(step.info))
        return step

    async def _end(self, cutoff: EndReason | None) -> Outcome:
        """Grade a cutoff, then apply the rule: infrastructure anywhere masks the episode."""
        self.state = State.GRADE
        env, last = self.env, self.last
        if cutoff is None and last is not None:  # the env ended it (and graded it)
            reason = _ENV_ENDS.get(str(last.done_reason), EndReason.INFRA)
            reward = last.reward
        elif self.steps == 0:  # nothing ran: nothing to grade, and nothing was achieved
            reason, reward = cutoff or EndReason.MAX_TURNS, 0.0
        else:
            reason = cutoff or EndReason.MAX_TURNS
            t0 = time.monotonic()
            try:
                reward = await env.acompute_final_reward()
            except (InfraError, SandboxClosed) as exc:
                return self._outcome(EndReason.INFRA, None, infra_error=_describe(exc))
            finally:
                self.timings.grading_s += time.monotonic() - t0
        infra = env.infra_error or (last.infra_error if last else None)
        if infra is None and env.verdict is not None:
            infra = env.verdict.infra_error
        if infra is not None or reason is EndReason.INFRA:
            return self._outcome(EndReason.INFRA, None, infra_error=infra or "infrastructure")
        if reason is EndReason.MAX_TURNS and last and last.steps == 0 and last.format_errors:
            reason = EndReason.FORMAT_ERROR
        return self._outcome(reason, reward)

    def _outcome(
        self,
        reason: EndReason,
        reward: float | None,
        *,
        infra_error: str | None = None,
        error: str | None = None,
    ) -> Outcome:
        last = self.last
        return Outcome(
            end_reason=reason,
            reward=None if reason in MASKED else reward,
            verdict=self.env.verdict,
            patch=last.patch if last else None,
            infra_error=infra_error,
            error=error,
            turns=self.turns,
            steps=self.steps,
            format_errors=last.format_errors if last else 0,
            env_done_reason=last.done_reason if last and last.done else None,
            last=last,
            timings=self.timings,
        )


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
