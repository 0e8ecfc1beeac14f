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
4. the loop itself is :class:`patchgym_agents.driver.EpisodeDriver` (shared with every
   engine); this module supplies only the token plumbing (:class:`VerlTurns`). A masked
   outcome (infrastructure failure: lost sandbox, image missing, failed grading, ...)
   zeroes the whole response mask and sets ``extra_fields["reward_valid"] = False`` so
   no gradient comes from a fake 0 (:mod:`patchgym_trainer.engines.infra_rule`).
5. the hack flags of the episode's verdict (``Outcome.hack_fields()``: ``hack/<flag>`` and
   ``hack/any``, 1.0 or 0.0, the same keys every sample) go into ``extra_fields`` (so
   they are columns of the step's batch) and ``extra_fields["reward_extra_info"]``,
   which verl averages into its validation metrics (``val-aux/<source>/hack/any/mean@N``)
   and writes into rollout dumps. Per training step, our replay-buffer sampler
   (:mod:`.replay_buffer`, selected by the launcher) adds their rates over the step's
   graded samples (``hack/<flag>``, ``hack/any``: :mod:`.hack_metrics`) to verl's metrics.

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
from patchgym_agents.driver import EnvStep, EpisodeDriver, Outcome, Turns
from patchgym_envs import EnvConfig, SWEEnv, Task
from patchgym_envs.env import Provision
from patchgym_sandbox import (
    BackendConfig,
    Sandbox,
    SandboxBackend,
    SandboxGroups,
    SandboxSpec,
    create_backend,
    load_config,
)

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
        if "max_turns" in agent_cfg:
            raise ValueError(
                "the agent loop's step limit is env_args.max_steps, not agent.max_turns"
            )
        self.max_turns: int = self.env.max_steps
        self.sandbox_groups: bool = bool(agent_cfg.get("sandbox_groups", True))
        self.prompt_length: int = int(self.rollout_config.prompt_length)
        self.response_length: int = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        task = task_from_extra_info(kwargs.get("extra_info"))
        request_id = uuid4().hex
        extra: dict[str, Any] = {}
        if self.sandbox_groups:
            backend, groups = shared_groups(self.env.sandbox)
            extra = {"backend": backend, "provision": group_provision(task.id, groups)}
        env = SWEEnv(task, config=self.env, idx=f"verl-{request_id[:8]}", **extra)
        agent = make_agent(self.scaffold, tool_format="text", workdir=task.workdir)
        turns = VerlTurns(self, agent, request_id, sampling_params)
        outcome = await EpisodeDriver(env, agent, max_turns=self.max_turns).run(turns)
        return self._output(turns, outcome, task=task, agent=agent, sandbox_s=env.phases.sandbox_s)

    def _output(
        self,
        turns: VerlTurns,
        outcome: Outcome,
        *,
        task: Task,
        agent: SWEAgent,
        sandbox_s: float,
    ) -> AgentLoopOutput:
        token_ids, prompt_len, logprobs = turns.token_ids, turns.prompt_len, turns.logprobs
        prompt_ids = token_ids[:prompt_len][-self.prompt_length :]
        response_ids = token_ids[prompt_len:][: self.response_length]
        response_mask = list(turns.mask[: self.response_length])
        valid = not outcome.masked
        if not valid:
            response_mask = [0] * len(response_ids)
        t = outcome.timings
        hack = outcome.hack_fields()
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=response_mask,
            response_logprobs=logprobs[: self.response_length] if logprobs else None,
            reward_score=float(outcome.reward or 0.0),
            num_turns=2 * outcome.turns + 1,
            metrics=AgentLoopMetrics(
                generate_sequences=float(t.model_s),
                tool_calls=float(t.sandbox_s + t.tools_s + t.grading_s),
            ),
            extra_fields={
                "task_id": task.id,
                "reward_valid": valid,
                "infra_error": outcome.infra_error or "",
                "resolved": bool(outcome.resolved),
                "stop_reason": outcome.end_reason.value,
                "format_errors": agent.format_errors,
                "turns": outcome.turns,
                "sandbox_s": round(float(sandbox_s), 3),
                **hack,
                "reward_extra_info": hack,
            },
        )


class VerlTurns(Turns):
    """verl's part of an episode: generation on its server manager, Continuous Token merges.

    The model's tokens enter the response with mask 1; an observation's chat-template
    tokens with mask 0. ``generate`` answers None when ``response_length`` is spent.
    """

    def __init__(
        self, loop: SWEAgentLoop, agent: SWEAgent, request_id: str, sampling: dict[str, Any]
    ) -> None:
        self.loop = loop
        self.agent = agent
        self.request_id = request_id
        self.sampling = sampling
        self.token_ids: list[int] = []
        self.prompt_len = 0
        self.mask: list[int] = []
        self.logprobs: list[float] = []
        self._before: list[dict[str, Any]] = []

    async def generate(self) -> str | None:
        loop = self.loop
        if not self.token_ids:
            self.token_ids = await loop.ct_build_initial_tokens(self.agent.messages)
            self.prompt_len = len(self.token_ids)
        budget = loop.response_length - len(self.mask)
        if budget <= 0:
            return None
        out = await loop.server_manager.generate(
            request_id=self.request_id,
            prompt_ids=self.token_ids,
            sampling_params={**self.sampling, "max_tokens": budget},
        )
        merged, self.mask, new_lp = await loop.ct_merge_assistant_token(
            self.token_ids,
            list(out.token_ids),
            self.mask,
            self.logprobs if (self.logprobs or out.log_probs) else None,
            assistant_logprobs=list(out.log_probs) if out.log_probs else None,
        )
        self.token_ids = merged.token_ids
        if new_lp is not None:
            self.logprobs = list(new_lp)
        tokenizer: Any = loop.tokenizer
        return str(tokenizer.decode(out.token_ids, skip_special_tokens=True))

    async def acted(self, action: Any) -> None:
        self._before = self.agent.messages  # ends with the assistant turn just generated

    async def observed(self, step: EnvStep) -> None:
        if len(self.mask) >= self.loop.response_length:
            return  # the next generate ends the episode (max_tokens)
        merged, self.mask, new_lp = await self.loop.ct_merge_context_msg(
            self._before,
            self.agent.messages,
            self.token_ids,
            self.mask,
            self.logprobs if self.logprobs else None,
        )
        self.token_ids = merged.token_ids
        if new_lp is not None and self.logprobs:
            self.logprobs = list(new_lp)
