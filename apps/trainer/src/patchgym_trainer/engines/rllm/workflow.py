"""Current-rLLM workflows over our env and agent, both thin adapters over the shared driver.

- ``PatchgymSWEWorkflow``: one SWE episode as a ``Workflow``. ``run()`` resets itself
  (``AgentWorkflowEngine`` calls ``run`` without ``reset``; ``UnifiedWorkflowEngine``
  calls both, which is harmless); ``agent_args`` reach :class:`patchgym_agents.SWEAgent`
  (``use_fn_calling``, ``format_model_response``, ``prompts="rllm"``); it owns the episode's
  sandbox (through :class:`PatchgymSWEEnv`, built from the task row, created at the first
  step) and closes it at the episode's end.
- ``PatchgymMultiTurnWorkflow``: rLLM's ``MultiTurnWorkflow`` constructor (``agent_cls``,
  ``env_cls``, ``agent_args``, ``env_args``, ``max_steps``; the env is built once and reset
  with each task) and its timing metrics, with the episode played by the same driver.

Both run :class:`patchgym_agents.driver.EpisodeDriver` (the loop every engine shares);
:class:`RllmTurns` is the rLLM part (model calls through the workflow's ``rollout_engine``,
token ids and logprobs stay on rLLM's side; a ``length`` finish ends the episode as
``max_tokens``). The driver grades an episode that stops without the env saying done (max
turns, a length cut: the tests run on the current patch, like the v0.2 path's
``compute_final_reward``) and closes the env (its sandbox) on every path. Masked outcomes
(infrastructure) follow :mod:`patchgym_trainer.engines.infra_rule`: the trajectory's steps
are moved out (``trajectory.info["infra_steps"]``) and
:class:`~patchgym_trainer.engines.infra_rule.InfraEpisodeError` ends the episode as
``TerminationReason.ERROR``, which rLLM's engines retry, then drop or mask.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from patchgym_agents.driver import EndReason, EpisodeDriver, Outcome, Turns
from patchgym_envs import SWEEnv
from patchgym_trainer.engines.infra_rule import InfraEpisodeError
from patchgym_trainer.engines.rllm import require_rllm
from patchgym_trainer.errors import ConfigError

require_rllm()

from rllm.workflows.multi_turn_workflow import (  # noqa: E402
    MultiTurnWorkflow,
)
from rllm.workflows.workflow import (  # noqa: E402
    TerminationEvent,
    TerminationReason,
    Workflow,
)

from patchgym_trainer.engines.rllm.env_agent import PatchgymSWEAgent, PatchgymSWEEnv  # noqa: E402

ModelCall = Callable[..., Awaitable[Any]]
"""``rollout_engine.get_model_response(messages, application_id=uid, **kwargs)`` or a wrapper."""


class PatchgymSWEWorkflow(Workflow):  # type: ignore[misc]  # rLLM ships no types
    def __init__(
        self,
        *args: Any,
        env_args: dict[str, Any] | None = None,
        scaffold: str | None = None,
        tool_format: str | None = None,
        max_steps: int = 40,
        agent_args: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.env_args: dict[str, Any] = dict(env_args or {"sandbox": {"type": "local"}})
        if scaffold is not None:  # None: env_args' scaffold, else EnvConfig's default
            self.env_args.setdefault("scaffold", scaffold)
        scaffold = self.env_args.get("scaffold", scaffold)
        self.max_steps = max_steps
        self.agent = PatchgymSWEAgent(scaffold, tool_format=tool_format, **(agent_args or {}))

    async def run(self, task: dict[str, Any], uid: str, **kwargs: Any) -> None:
        self.reset(task=task, uid=uid)
        env = PatchgymSWEEnv.from_dict({**task, **self.env_args, "idx": uid})
        driver = EpisodeDriver(env, self.agent, max_turns=self.max_steps)
        outcome = await driver.run(
            RllmTurns(self.agent, self.rollout_engine.get_model_response, uid, kwargs)
        )
        raise TerminationEvent(termination(self.agent, outcome, env))


class PatchgymMultiTurnWorkflow(MultiTurnWorkflow):  # type: ignore[misc]  # rLLM ships no types
    """``MultiTurnWorkflow(agent_cls=PatchgymSWEAgent, env_cls=PatchgymSWEEnv, ...)``,
    its episode played by the shared driver (graded at a cutoff, closed at the end).

    The reset goes through the executor, as the stock workflow calls it; model calls
    through its ``timed_llm_call``, so rLLM's timing metrics stay filled in.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(self.env, SWEEnv):
            raise ConfigError(
                f"env_cls: PatchgymMultiTurnWorkflow plays patchgym envs (PatchgymSWEEnv), "
                f"got {type(self.env).__name__}"
            )
        if not isinstance(self.agent, PatchgymSWEAgent):
            raise ConfigError(
                f"agent_cls: PatchgymMultiTurnWorkflow needs PatchgymSWEAgent (or a subclass), "
                f"got {type(self.agent).__name__}"
            )

    async def run(self, task: dict[str, Any], uid: str, **kwargs: Any) -> None:
        await self.timed_env_call(self.reset, task=task, uid=uid)
        self.env.idx = uid  # the sandboxes' rollout label, as PatchgymSWEWorkflow's env has
        driver = EpisodeDriver(self.env, self.agent, max_turns=self.max_steps)
        outcome = await driver.run(RllmTurns(self.agent, self.timed_llm_call, uid, kwargs))
        timings = outcome.timings
        self._timing_data["env_time"] += timings.sandbox_s + timings.tools_s
        self.add_reward_time(timings.grading_s)
        raise TerminationEvent(termination(self.agent, outcome, self.env))


def termination(agent: PatchgymSWEAgent, outcome: Outcome, env: SWEEnv) -> Any:
    """rLLM's termination reason; a masked outcome raises (infra_rule) instead."""
    if outcome.masked:
        why = outcome.infra_error or outcome.error or outcome.end_reason.value
        agent.drop_steps_for_infra(why)
        raise InfraEpisodeError(why, task_id=env.task.id if env.task else None)
    if outcome.env_done_reason is None:  # a cutoff: the grade is the final reward
        agent.set_final_reward(float(outcome.reward or 0.0))
    return TERMINATION.get(outcome.end_reason, TerminationReason.ENV_DONE)


TERMINATION = {
    EndReason.MAX_TURNS: TerminationReason.MAX_TURNS_EXCEEDED,
    EndReason.FORMAT_ERROR: TerminationReason.MAX_TURNS_EXCEEDED,
    EndReason.MAX_TOKENS: TerminationReason.MAX_RESPONSE_LENGTH_EXCEEDED,
}
"""Graded ends rLLM names apart; the others (submitted, timeout, context) are ENV_DONE."""


class RllmTurns(Turns):
    """rLLM's part of an episode: ``call`` (the workflow's rollout engine) answers each turn."""

    def __init__(
        self, agent: PatchgymSWEAgent, call: ModelCall, uid: str, kwargs: dict[str, Any]
    ) -> None:
        self.agent = agent
        self.call = call
        self.uid = uid
        self.kwargs = kwargs
        self._output: Any = None

    async def generate(self) -> str | None:
        if getattr(self._output, "finish_reason", None) == "length":
            return None  # the last reply was cut: max_tokens
        self._output = await self.call(
            self.agent.chat_completions, application_id=self.uid, **self.kwargs
        )
        return str(self._output.text)

    async def acted(self, action: Any) -> None:
        step = self.agent.get_current_state()
        if step is not None:
            step.model_output = self._output
