"""The one rule for infrastructure failures, and how each training engine receives it.

**Rule (applied once, in :class:`patchgym_agents.driver.EpisodeDriver`): an episode that
ended on an infrastructure failure (the env's ``info["reward_valid"] is False``,
``info["infra_error"]`` set, grading failed, ``InfraError``/``SandboxClosed`` raised:
sandbox lost, image missing, create timeout) is masked (``Outcome.reward is None``) and
never contributes a gradient.** It is not a task outcome, so it
is never scored as a 0. Each engine is told in the form it understands:

| engine | what patchgym hands it | what the engine does (rLLM file:line at the pinned refs) |
|---|---|---|
| verl agent loop (``patchgym_trainer.engines.verl.agent_loop``) | response mask all 0, ``extra_fields.reward_valid=False`` | the masked tokens carry no loss |
| current rLLM, ``AgentWorkflowEngine`` / ``UnifiedWorkflowEngine`` (workflow path) | ``TerminationReason.ERROR`` with ``episode.info["error"]`` naming the ``InfraEpisodeError``, and the trajectory's steps moved out (``trajectory.info["infra_steps"]``) | retried fresh up to ``retry_limit`` (``rllm/engine/agent_workflow_engine.py:130``, ``rllm/engine/unified_workflow_engine.py:161``); if every attempt fails it raises (``raise_on_error=True``) or keeps the ERROR episode, which ``AgentWorkflowEngine.transform_results_for_verl`` drops because it has no steps (``agent_workflow_engine.py:262-266``) and ``compact_filtering.mask_error`` masks (``rllm/trainer/algorithms/config.py:160``) |
| rLLM v0.2.x ``AgentExecutionEngine`` (``AgentTrainer(agent_class, env_class)``) | ``PatchgymSWEEnv.step`` raises :class:`InfraEpisodeError` | ``run_agent_trajectory_with_retry`` (``rllm/engine/agent_execution_engine.py:493-502`` at v0.2.1.post1) reruns the trajectory from ``env.reset`` with a fresh sandbox, so the failed attempt's tokens never reach ``AgentPPOTrainer._transform_agent_trajectories``; after ``retry_limit`` (3) failures it raises and the step stops instead of training on a fake 0 |

v0.2.x has no per-trajectory exclusion flag in its Token mode: the response masks come
from ``assemble_steps`` (``agent_execution_engine.py:394``), which overwrites the
``overlong_filter`` masks, and the token result carries no ``info``; raising is the one
signal the engine acts on. ``execute_tasks`` (v0.2's evaluation path) has no retry, so
there an infra failure raises out of the batch.
"""

from __future__ import annotations

from patchgym_agents.driver import infra_error_of

__all__ = ["InfraEpisodeError", "infra_error_of"]


class InfraEpisodeError(RuntimeError):
    """The episode ended on an infrastructure failure; its reward is not a task outcome."""

    def __init__(self, infra_error: str, *, task_id: str | None = None) -> None:
        self.infra_error = infra_error
        self.task_id = task_id
        where = f" (task {task_id})" if task_id else ""
        super().__init__(f"infrastructure failure{where}: {infra_error}")
