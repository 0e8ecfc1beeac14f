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

On both, an episode that reaches ``max_steps`` without the env saying done is graded
like the v0.2 path (``compute_final_reward``: the tests run on the current patch).
Infrastructure failures follow :mod:`patchgym_trainer.infra_rule`: the trajectory's
steps are moved out (``trajectory.info["infra_steps"]``) and
:class:`~patchgym_trainer.infra_rule.InfraEpisodeError` ends the episode as
``TerminationReason.ERROR``, which rLLM's engines retry, then drop or mask. Model calls
go through the workflow's ``rollout_engine`` (token ids and logprobs stay on rLLM's side).
"""

from __future__ import annotations

from typing import Any

from patchgym_trainer.infra_rule import InfraEpisodeError, infra_error_of
from patchgym_trainer.rllm import require_rllm

require_rllm()

from rllm.workflows.multi_turn_workflow import (  # noqa: E402  # pyright: ignore[reportMissingImports]
    MultiTurnWorkflow,
)
from rllm.workflows.workflow import (  # noqa: E402  # pyright: ignore[reportMissingImports]
    TerminationEvent,
    TerminationReason,
    Workflow,
)

from patchgym_trainer.rllm.env_agent import PatchgymSWEAgent, PatchgymSWEEnv  # noqa: E402

GRADED_AT_CUTOFF = frozenset(
    {TerminationReason.MAX_TURNS_EXCEEDED, TerminationReason.MAX_RESPONSE_LENGTH_EXCEEDED}
)
"""Episodes that stop without the env saying done; the tests still decide their reward."""


class PatchgymSWEWorkflow(Workflow):  # type: ignore[misc]  # rLLM ships no types
    def __init__(
        self,
        *args: Any,
        env_args: dict[str, Any] | None = None,
        scaffold: str = "r2egym",
        tool_format: str | None = None,
        max_steps: int = 40,
        agent_args: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.env_args: dict[str, Any] = dict(env_args or {"sandbox": {"type": "local"}})
        self.env_args.setdefault("scaffold", scaffold)
        self.max_steps = max_steps
        self.agent = PatchgymSWEAgent(scaffold, tool_format=tool_format, **(agent_args or {}))

    async def run(self, task: dict[str, Any], uid: str, **kwargs: Any) -> None:
        self.reset(task=task, uid=uid)
        env = PatchgymSWEEnv.from_dict({**task, **self.env_args, "idx": uid})
        try:
            obs, info = await env.areset()
            self.agent.update_from_env(obs, 0.0, False, info)
            reason = await self._loop(env, uid, **kwargs)
            if reason in GRADED_AT_CUTOFF:
                self.agent.set_final_reward(await env.acompute_final_reward())
                self._check_infra(env, env.infra_error)
            raise TerminationEvent(reason)
        finally:
            await env.aclose()

    async def _loop(self, env: PatchgymSWEEnv, uid: str, **kwargs: Any) -> TerminationReason:
        for _ in range(self.max_steps):
            output = await self.rollout_engine.get_model_response(
                self.agent.chat_completions, application_id=uid, **kwargs
            )
            action = self.agent.update_from_model(output.text)
            step = self.agent.get_current_state()
            if step is not None:
                step.model_output = output
            obs, reward, done, info = await env.astep(action)
            self.agent.update_from_env(obs, reward, done, info)
            self._check_infra(env, infra_error_of(info))
            if done:
                return TerminationReason.ENV_DONE
            if getattr(output, "finish_reason", None) == "length":
                return TerminationReason.MAX_RESPONSE_LENGTH_EXCEEDED
        return TerminationReason.MAX_TURNS_EXCEEDED

    def _check_infra(self, env: PatchgymSWEEnv, infra_error: str | None) -> None:
        if infra_error is not None:
            self.agent.drop_steps_for_infra(infra_error)
            raise InfraEpisodeError(infra_error, task_id=env.task.id if env.task else None)


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
