"""The verl agent loop: one SWE episode per dataset sample, token in, token out.

Registered in ``verl.experimental.agent_loop``'s registry as ``patchgym_swe``. verl builds
it with ``hydra.utils.instantiate`` from an agent-loop config entry; the extra keys of that
entry (``env_args``, ``agent``) are our settings (see :mod:`.launch`). Per sample:

1. the task comes from the row's ``extra_info`` (written by ``patchgym datasets convert``);
2. the prompt (our scaffold's system prompt + the task) is tokenized with verl's
   Continuous Token builder, so tokens match what the trainer re-computes;
3. each turn the server manager generates from the running token ids; those tokens go
   into the response with mask 1; the decoded text is the agent's action; the tool
   observation is appended as a chat message whose template tokens get mask 0;
4. at the end the verdict's reward is the sample's ``reward_score``; an infrastructure
   failure (lost sandbox, image missing, ...) zeroes the whole response mask and sets
   ``extra_fields["reward_valid"] = False`` so no gradient comes from a fake 0 (the rule
   shared with the rLLM adapters: :mod:`patchgym_trainer.infra_rule`).

The sandbox is created lazily by :class:`patchgym_envs.SWEEnv` and always closed in
``finally``. Everything is awaited on verl's loop; nothing here calls ``asyncio.run``.

Groups: verl builds one loop object per sample and launches a batch chunk's samples
together, so the rollout.n samples of a prompt that land on one worker claim their
sandboxes from one :class:`patchgym_sandbox.SandboxGroups` per (event loop, sandbox
config), made together within a short window (``agent.sandbox_groups: false`` turns it
off). That per-worker cache is the one piece of process state here.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Mapping
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)

from patchgym_agents import SWEAgent, make_agent
from patchgym_envs import EnvConfig, SWEEnv, Task
from patchgym_envs.env import Provision
from patchgym_sandbox import (
    BackendConfig,
    InfraError,
    Sandbox,
    SandboxBackend,
    SandboxClosed,
    SandboxGroups,
    SandboxSpec,
    create_backend,
    load_config,
)
from patchgym_trainer.infra_rule import infra_error_of

log = logging.getLogger(__name__)

AGENT_NAME = "patchgym_swe"


_SHARED: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[str, tuple[SandboxBackend, SandboxGroups]]
] = weakref.WeakKeyDictionary()


def shared_groups(
    sandbox: BackendConfig | Mapping[str, Any],
) -> tuple[SandboxBackend, SandboxGroups]:
    """This worker loop's backend and groups for a sandbox config (made on first use)."""
    per_loop = _SHARED.setdefault(asyncio.get_running_loop(), {})
    sandbox = load_config(sandbox)
    key = sandbox.model_dump_json()
    if key not in per_loop:
        backend = create_backend(sandbox)
        per_loop[key] = (backend, SandboxGroups(backend, window_s=0.25))
    return per_loop[key]


def group_provision(task_key: str, groups: SandboxGroups) -> Provision:
    async def provision(_: SandboxBackend, spec: SandboxSpec) -> Sandbox:
        return await groups.claim(task_key, spec)

    return provision


def task_from_extra_info(extra_info: Any) -> Task:
    """The task of a verl row (``extra_info`` = ``Task.to_row()`` plus ``index``/``split``)."""
    if isinstance(extra_info, Task):
        return extra_info
    if not isinstance(extra_info, dict):
        raise ValueError(
            f"row extra_info must be a task mapping (written by `patchgym datasets convert`), "
            f"got {type(extra_info).__name__}"
        )
    fields = {k: v for k, v in extra_info.items() if k in Task.model_fields}
    return Task.model_validate(fields)


@register(AGENT_NAME)
class SWEAgentLoop(AgentLoopBase):
    """See the module docstring."""

    def __init__(
        self,
        *args: Any,
        env_args: dict[str, Any] | None = None,
        agent: dict[str, Any] | None = None,
        name: str | None = None,
        tools: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        agent_cfg = dict(agent or {})
        node = dict(env_args or {})
        if "scaffold" in agent_cfg:
            node["scaffold"] = agent_cfg["scaffold"]
        self.env = EnvConfig.model_validate(node)  # validated once per worker, shared by samples
        self.scaffold: str = self.env.scaffold
        self.max_turns: int = int(agent_cfg.get("max_turns", self.env.max_steps))
        self.sandbox_groups: bool = bool(agent_cfg.get("sandbox_groups", True))
        self.prompt_length: int = int(self.rollout_config.prompt_length)
        self.response_length: int = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        task = task_from_extra_info(kwargs.get("extra_info"))
        request_id = uuid4().hex
        metrics: dict[str, Any] = {"generate_sequences": 0.0, "tool_calls": 0.0}
        extra: dict[str, Any] = {}
        if self.sandbox_groups:
            backend, groups = shared_groups(self.env.sandbox)
            extra = {"backend": backend, "provision": group_provision(task.id, groups)}
        env = SWEEnv(task, config=self.env, idx=f"verl-{request_id[:8]}", **extra)
        agent = make_agent(self.scaffold, tool_format="text", workdir=task.workdir)
        prompt_len = 0
        token_ids: list[int] = []
        mask: list[int] = []
        logprobs: list[float] = []
        reward = 0.0
        info: dict[str, Any] = {}
        infra_error: str | None = None
        turns = 0
        stop = "max_turns"
        try:
            obs, info = await env.areset()
            agent.update_from_env(obs, 0.0, False, info)
            token_ids = await self.ct_build_initial_tokens(agent.messages)
            prompt_len = len(token_ids)
            done = False
            while not done and turns < self.max_turns:
                budget = self.response_length - len(mask)
                if budget <= 0:
                    stop = "response_length"
                    break
                params = {**sampling_params, "max_tokens": budget}
                t0 = time.monotonic()
                with env.phases.phase("generation"):
                    out = await self.server_manager.generate(
                        request_id=request_id, prompt_ids=token_ids, sampling_params=params
                    )
                metrics["generate_sequences"] += time.monotonic() - t0
                merged, mask, new_lp = await self.ct_merge_assistant_token(
                    token_ids,
                    list(out.token_ids),
                    mask,
                    logprobs if (logprobs or out.log_probs) else None,
                    assistant_logprobs=list(out.log_probs) if out.log_probs else None,
                )
                token_ids = merged.token_ids
                if new_lp is not None:
                    logprobs = list(new_lp)
                turns += 1
                tokenizer: Any = self.tokenizer
                text = tokenizer.decode(out.token_ids, skip_special_tokens=True)
                action = agent.update_from_model(text)
                before = agent.messages  # ends with the assistant turn just generated
                t0 = time.monotonic()
                obs, reward, done, info = await env.astep(action)
                metrics["tool_calls"] += time.monotonic() - t0
                agent.update_from_env(obs, reward, done, info)
                if done:
                    stop = str(info.get("done_reason", "done"))
                    break
                if len(mask) >= self.response_length:
                    stop = "response_length"
                    break
                merged, mask, new_lp = await self.ct_merge_context_msg(
                    before, agent.messages, token_ids, mask, logprobs if logprobs else None
                )
                token_ids = merged.token_ids
                if new_lp is not None and logprobs:
                    logprobs = list(new_lp)
            if not env.done:
                reward = await env.acompute_final_reward()
                info = {"verdict": env.verdict.model_dump(mode="json")} if env.verdict else {}
            infra_error = infra_error_of(info) or env.infra_error  # patchgym_trainer.infra_rule
        except (InfraError, SandboxClosed) as exc:
            infra_error = f"{type(exc).__name__}: {exc}"
        finally:
            await env.aclose()
        metrics["sandbox_s"] = env.phases.sandbox_s
        return self._output(
            token_ids,
            prompt_len,
            mask,
            logprobs,
            reward=reward,
            infra_error=infra_error,
            turns=turns,
            stop=stop,
            task=task,
            agent=agent,
            info=info,
            metrics=metrics,
        )

    def _output(
        self,
        token_ids: list[int],
        prompt_len: int,
        mask: list[int],
        logprobs: list[float],
        *,
        reward: float,
        infra_error: str | None,
        turns: int,
        stop: str,
        task: Task,
        agent: SWEAgent,
        info: dict[str, Any],
        metrics: dict[str, Any],
    ) -> AgentLoopOutput:
        prompt_ids = token_ids[:prompt_len][-self.prompt_length :]
        response_ids = token_ids[prompt_len:][: self.response_length]
        response_mask = list(mask[: self.response_length])
        valid = infra_error is None
        if not valid:
            response_mask = [0] * len(response_ids)
            reward = 0.0
        verdict = info.get("verdict") or {}
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=response_mask,
            response_logprobs=logprobs[: self.response_length] if logprobs else None,
            reward_score=float(reward),
            num_turns=2 * turns + 1,
            metrics=AgentLoopMetrics(
                generate_sequences=float(metrics["generate_sequences"]),
                tool_calls=float(metrics["tool_calls"]),
            ),
            extra_fields={
                "task_id": task.id,
                "reward_valid": valid,
                "infra_error": infra_error or "",
                "resolved": bool(verdict.get("resolved", False)) if valid else False,
                "stop_reason": stop,
                "format_errors": agent.format_errors,
                "turns": turns,
                "sandbox_s": round(float(metrics["sandbox_s"]), 3),
            },
        )
