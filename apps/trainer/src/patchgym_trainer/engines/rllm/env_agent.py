"""``PatchgymSWEEnv`` and ``PatchgymSWEAgent``: our env and agent as rLLM classes.

rLLM keeps ``BaseEnv`` in ``rllm.environments.base.base_env`` and ``BaseAgent`` /
``Action`` / ``Step`` / ``Trajectory`` in ``rllm.agents.agent`` in both v0.2.x and the
current tree, so one module serves both. The agent mirrors each of our steps into an
rLLM ``Step`` whose ``action`` is a JSON value (the tool call as a dict, ``""`` for a
malformed reply), so ``Trajectory.to_dict()`` serialises; the env receives an rLLM
``Action`` wrapping our action object (our env unwraps it).

Infrastructure failures follow :mod:`patchgym_trainer.engines.infra_rule`: ``step`` and
``compute_final_reward`` raise :class:`~patchgym_trainer.engines.infra_rule.InfraEpisodeError`
(rLLM's engines retry or drop the episode) instead of returning a fake 0.
"""

from __future__ import annotations

from typing import Any

from patchgym_agents import make_agent
from patchgym_envs import SWEEnv
from patchgym_sandbox import InfraError, SandboxClosed
from patchgym_trainer.engines.infra_rule import InfraEpisodeError, infra_error_of
from patchgym_trainer.engines.rllm import require_rllm

require_rllm()

from rllm.agents.agent import (  # noqa: E402
    Action,
    BaseAgent,
    Step,
    Trajectory,
)
from rllm.environments.base.base_env import (  # noqa: E402
    BaseEnv,
)


class PatchgymSWEEnv(SWEEnv, BaseEnv):  # type: ignore[misc]  # rLLM ships no types
    """:class:`patchgym_envs.SWEEnv` registered as an rLLM ``BaseEnv``.

    ``SWEEnv.from_dict`` is a classmethod, so rLLM's ``env_class.from_dict(row)`` builds
    this subclass; ``reset``/``close``/``idx`` come from ``SWEEnv`` (first in the MRO).
    """

    def step(self, action: Any) -> tuple[str, float, bool, dict[str, Any]]:
        obs, reward, done, info = super().step(action)
        err = infra_error_of(info)
        if err is not None:
            raise InfraEpisodeError(err, task_id=self.task.id if self.task else None)
        return obs, reward, done, info

    def compute_final_reward(self) -> float:
        try:
            reward = super().compute_final_reward()
        except (InfraError, SandboxClosed) as exc:
            why = f"{type(exc).__name__}: {exc}"
            raise InfraEpisodeError(why, task_id=self.task.id if self.task else None) from exc
        if self.infra_error is not None:
            raise InfraEpisodeError(self.infra_error, task_id=self.task.id if self.task else None)
        return reward


def json_action(action: Any) -> Any:
    """Our action object as a JSON value: the tool call's dict, or ``""`` when malformed."""
    inner = getattr(action, "action", action)
    if hasattr(inner, "model_dump"):
        return inner.model_dump(mode="json")
    return (
        inner if isinstance(inner, (str, int, float, bool, type(None), dict, list)) else str(inner)
    )


class PatchgymSWEAgent(BaseAgent):  # type: ignore[misc]  # rLLM ships no types
    """:class:`patchgym_agents.SWEAgent` behind rLLM's ``BaseAgent`` contract."""

    def __init__(
        self, scaffold: str | None = None, tool_format: str | None = None, **kwargs: Any
    ) -> None:
        self.inner = make_agent(scaffold, tool_format=tool_format, **kwargs)
        self._trajectory = Trajectory()

    @property
    def chat_completions(self) -> list[dict[str, Any]]:
        return self.inner.chat_completions

    @property
    def trajectory(self) -> Trajectory:
        return self._trajectory

    def update_from_env(
        self, observation: Any, reward: float, done: bool, info: dict[str, Any], **kwargs: Any
    ) -> None:
        self.inner.update_from_env(observation, reward, done, info, **kwargs)
        step = self.get_current_state()
        if step is not None:
            step.reward = float(reward)
            step.done = bool(done)
            step.info.update(dict(info or {}))
        if done:
            self._trajectory.reward = float(reward)

    def update_from_model(self, response: str, **kwargs: Any) -> Action:
        action = self.inner.update_from_model(response, **kwargs)
        ours = self.inner.get_current_state()
        step = Step(
            chat_completions=list(ours.chat_completions) if ours else [],
            observation=ours.observation if ours else None,
            thought=ours.thought if ours else "",
            action=json_action(action),
            model_response=response,
        )
        step.info = dict(ours.info) if ours else {}
        self._trajectory.steps.append(step)
        return Action(action=action)

    def reset(self) -> None:
        self.inner.reset()
        self._trajectory = Trajectory()

    def get_current_state(self) -> Step | None:
        return self._trajectory.steps[-1] if self._trajectory.steps else None

    def set_final_reward(self, reward: float) -> None:
        """The grade of an episode that ended without the env saying done (max turns)."""
        step = self.get_current_state()
        if step is not None:
            step.reward = float(reward)
            step.done = True
        self._trajectory.reward = float(reward)

    def drop_steps_for_infra(self, infra_error: str) -> None:
        """Move the steps out of the trajectory so engines drop the episode (infra_rule)."""
        self._trajectory.info["infra_error"] = infra_error
        self._trajectory.info["infra_steps"] = len(self._trajectory.steps)
        self._trajectory.steps = []
        self._trajectory.reward = 0.0
