"""Current-rLLM workflows over our env and agent.

- ``PatchgymSWEWorkflow``: one SWE episode as a ``Workflow``. ``run()`` resets itself
  (``AgentWorkflowEngine`` calls ``run`` without ``reset``; ``UnifiedWorkflowEngine``
  calls both, which is harmless); ``agent_args`` reach :class:`patchgym_agents.SWEAgent`
  (``use_fn_calling``, ``format_model_response``, ``prompts="rllm"``); it owns the episode's sandbox (through
  :class:`PatchgymSWEEnv`, created at the first step) and closes it in ``finally``.
- ``PatchgymMultiTurnWorkflow``: rLLM's ``MultiTurnWorkflow`` with the same constructor,
  plus what the stock one lacks for a sandboxed env: the episode is graded when it ends
  at max turns or on a length cut, and the env (its sandbox) is closed at episode end
  instead of at the next reset.

``PatchgymSWEWorkflow`` runs :class:`patchgym_agents.driver.EpisodeDriver` (the loop every
engine shares); :class:`RllmTurns` is its rLLM part (model calls through the workflow's
``rollout_engine``, a ``length`` finish ends the episode as ``max_tokens``). On both, an
episode that reaches ``max_steps`` without the env saying done is graded like the v0.2
path (``compute_final_reward``: the tests run on the current patch). Masked outcomes
(infrastructure) follow :mod:`patchgym_trainer.engines.infra_rule`: the trajectory's
steps are moved out (``trajectory.info["infra_steps"]``) and
:class:`~patchgym_trainer.engines.infra_rule.InfraEpisodeError` ends the episode as
``TerminationReason.ERROR``, which rLLM's engines retry, then drop or mask. Model calls
go through the workflow's ``rollout_engine`` (token ids and logprobs stay on rLLM's side).
"""

from __future__ import annotations

from typing import Any

from patchgym_agents.driver import EndReason, EpisodeDriver, Outcome, Turns
from patchgym_trainer.engines.infra_rule import InfraEpisodeError
from patchgym_trainer.engines.rllm import require_rllm

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

GRADED_AT_CUTOFF = frozenset(
    {TerminationReason.MAX_TURNS_EXCEEDED, TerminationReason.MAX_RESPONSE_LENGTH_EXCEEDED}
)
"""Episodes that stop without the env saying done; the tests still decide their reward."""


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
        outcome = await driver.run(RllmTurns(self, uid, kwargs))
        raise TerminationEvent(self._termination(outcome, env))

    def _termination(self, outcome: Outcome, env: PatchgymSWEEnv) -> Any:
        """rLLM's termination reason; a masked outcome raises (infra_rule) instead."""
        if outcome.masked:
            why = outcome.infra_error or outcome.error or outcome.end_reason.value
            self.agent.drop_steps_for_infra(why)
            raise InfraEpisodeError(why, task_id=env.task.id if env.task else None)
        if outcome.env_done_reason is None:  # a cutoff: the grade is the final reward
            self.agent.set_final_reward(float(outcome.reward or 0.0))
        return TERMINATION.get(outcome.end_reason, TerminationReason.ENV_DONE)


TERMINATION = {
    EndReason.MAX_TURNS: TerminationReason.MAX_TURNS_EXCEEDED,
    EndReason.FORMAT_ERROR: TerminationReason.MAX_TURNS_EXCEEDED,
    EndReason.MAX_TOKENS: TerminationReason.MAX_RESPONSE_LENGTH_EXCEEDED,
}
"""Graded ends rLLM names apart; the others (submitted, timeout, context) are ENV_DONE."""


class RllmTurns(Turns):
    """rLLM's part of an episode: the workflow's ``rollout_engine`` answers each turn."""

    def __init__(self, workflow: PatchgymSWEWorkflow, uid: str, kwargs: dict[str, Any]) -> None:
        self.workflow = workflow
        self.uid = uid
        self.kwargs = kwargs
        self._output: Any = None

    async def generate(self) -> str | None:
        if getattr(self._output, "finish_reason", None) == "length":
            return None  # the last reply was cut: max_tokens
        agent = self.workflow.agent
        self._output = await self.workflow.rollout_engine.get_model_response(
            agent.chat_completions, application_id=self.uid, **self.kwargs
        )
        return str(self._output.text)

    async def acted(self, action: Any) -> None:
        step = self.workflow.agent.get_current_state()
        if step is not None:
            step.model_output = self._output


class PatchgymMultiTurnWorkflow(MultiTurnWorkflow):  # type: ignore[misc]  # rLLM ships no types
    """``MultiTurnWorkflow(agent_cls=PatchgymSWEAgent, env_cls=PatchgymSWEEnv, ...)``, graded and closed.

    The env's blocking API runs on its own loop thread (as the stock workflow calls it,
    through the executor), so grading and closing go through the executor too.
    """

    async def run(self, task: dict[str, Any], uid: str, **kwargs: Any) -> Any:
        try:
            try:
                return await super().run(task, uid, **kwargs)
            except TerminationEvent as event:
                if event.reason in GRADED_AT_CUTOFF:
                    reward = await self.run_in_executor(self.env.compute_final_reward)
                    self.agent.set_final_reward(reward)
                raise
        except InfraEpisodeError as exc:
            self.agent.drop_steps_for_infra(exc.infra_error)
            raise
        finally:
            await self.run_in_executor(self.env.close)
