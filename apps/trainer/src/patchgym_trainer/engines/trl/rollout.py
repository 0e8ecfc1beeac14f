"""TRL's ``rollout_func`` for SWE tasks: one graded :class:`SWEEnv` episode per sample.

TRL calls ``rollout(prompts, trainer)`` once per generation batch, with each dataset
prompt already repeated ``num_generations`` times (one entry per sample), and expects
``prompt_ids``, ``completion_ids`` and ``logprobs`` per sample; any other key is handed
to the reward functions, ``env_mask`` marks the completion tokens the model wrote (1)
apart from the environment's observation tokens (0). Per sample:

1. the task is the one whose prompt (scaffold system prompt + problem statement, as the
   agent renders it) this entry is; the sandbox is created by the environment;
2. each turn the trainer's own model generates from the running token ids (sampled,
   ``max_new_tokens_per_turn``), the decoded text is the agent's action, the
   observation is appended as chat-template tokens with mask 0;
3. the loop is :class:`patchgym_agents.driver.EpisodeDriver` (shared with every engine);
   the reward is the environment's verdict on the final repository state (the hidden
   tests graded in the sandbox, also after a turn or token cutoff); a masked outcome
   (infrastructure failure anywhere, grading included) gives ``env_reward=None`` (TRL
   then gives the sample no advantage) and an all-zero mask.

Generation is one narrow seam, :data:`TokenGenerate` (context token ids and a token
budget in, the new token ids out): by default the trainer's model in a worker thread; a
batched generator plugs in there without touching the loop.

Smoke-test device, never for real training: with ``force_gold`` > 0 the first
``force_gold`` samples of each group take their actions from
:class:`patchgym_agents.GoldPatchPolicy` instead of the model (the gold patch applied
through the scaffold's tools, those tokens masked 1), so a random model's group still
holds a resolved episode and the group advantage is non-zero.

Episodes run on one private event loop (:class:`patchgym_envs.looprunner.LoopRunner`),
concurrently, and each turn's generation is batched across the live episodes
(:class:`.generate.BatchedGenerator`, in a worker thread); nothing here calls
``asyncio.run``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from patchgym_agents import EpisodeContext, GoldPatchPolicy, SWEAgent, make_agent
from patchgym_agents.defaults import TEMPERATURE
from patchgym_agents.driver import EndReason, EnvStep, EpisodeDriver, Turns, hack_metrics
from patchgym_envs import EnvConfig, SWEEnv, Task
from patchgym_envs.looprunner import LoopRunner
from patchgym_trainer.engines.trl.generate import MAX_BATCH, BatchedGenerator, hf_batch_fn

TokenGenerate = Callable[[list[int], int], Awaitable[list[int]]]
"""``generate(context_ids, max_new_tokens) -> new_ids``: one sampled assistant turn (ending
at the end-of-turn token when the model wrote it)."""


class RolloutSettings(BaseModel):
    """What one episode may spend (from ``train.*`` and ``env.*``)."""

    model_config = ConfigDict(extra="forbid")

    scaffold: str
    max_new_tokens_per_turn: int
    max_completion_tokens: int
    max_turns: int | None = None
    """A turn limit below the env's ``max_steps`` (None: ``env.max_steps`` decides)."""
    temperature: float = TEMPERATURE
    force_gold: int = 0
    num_generations: int = 1
    batched: bool = True
    """Run the batch's episodes concurrently and generate each turn for all of them in one
    batched call (:mod:`.generate`); False: one episode, one sequence at a time."""
    static_cache_len: int | None = None
    """Batched generation decodes into one static cache of this many tokens per episode
    (``hf_batch_fn(static=...)``); None: the default dynamic cache."""


class Episode(BaseModel):
    """One sample as TRL needs it, plus what the env said about it."""

    task_id: str
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    reward: float | None
    resolved: bool
    forced_gold: bool
    turns: int
    stop: EndReason
    infra_error: str | None = None
    hack_flags: list[str] = []
    """What the episode tried (the verdict's flags; none when masked)."""

    @property
    def masked(self) -> bool:
        return self.reward is None


def prompt_messages(task: Task, scaffold: str) -> list[dict[str, Any]]:
    """The conversation an episode starts from (what the agent renders for the task)."""
    agent = make_agent(scaffold, tool_format="text", workdir=task.workdir)
    agent.update_from_env(task.problem_statement, 0.0, False, {"task_id": task.id})
    return [dict(m) for m in agent.messages]


def log_hack_metrics(trainer: Any, episodes: Sequence[Episode], mode: str) -> None:
    """``hack/<flag>`` and ``hack/any`` for this generation batch, into the trainer's own
    metrics (``GRPOTrainer._metrics[mode]``, averaged over the batches of a logging step
    and logged with the rewards), so they reach every ``report_to`` backend."""
    metrics = getattr(trainer, "_metrics", None)
    if metrics is None:
        return
    for key, rate in hack_metrics(episodes).items():
        metrics[mode][key].append(rate)


def prompt_key(prompt: Any) -> str:
    """The lookup key of a dataset prompt: its last user message (the task statement)."""
    if isinstance(prompt, str):
        return prompt
    users = [m["content"] for m in prompt if m.get("role") == "user"]
    return str(users[-1] if users else prompt[-1]["content"])


class EpisodeRollout:
    """The ``rollout_func`` handed to ``GRPOTrainer`` (see the module docstring)."""

    def __init__(
        self,
        tasks: Sequence[Task],
        *,
        env: EnvConfig,
        settings: RolloutSettings,
        tokenizer: Any,
    ) -> None:
        self.settings = settings
        self.env = env.model_copy(update={"scaffold": settings.scaffold})
        self.tokenizer = tokenizer
        self.tasks = {prompt_key(prompt_messages(t, settings.scaffold)): t for t in tasks}
        self.episodes: list[Episode] = []
        """Every episode of the run, in order (read after training for the summary)."""
        self._runner = LoopRunner("patchgym-trl-rollout")
        self._calls = 0
        self.generator: BatchedGenerator | None = None
        """This call's batched generator (``settings.batched``), kept for its stats."""

    def close(self) -> None:
        self._runner.stop()

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        from trl.models import unwrap_model_for_generation  # type: ignore[attr-defined]  # trl's lazy __init__ hides its names from mypy

        self._calls += 1
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as model:
            was_training = model.training
            model.eval()
            try:
                episodes = self.run_episodes(prompts, model)
            finally:
                model.train(was_training)
        log_hack_metrics(trainer, episodes, "train" if was_training else "eval")
        return {
            "prompt_ids": [e.prompt_ids for e in episodes],
            "completion_ids": [e.completion_ids for e in episodes],
            "logprobs": None,
            "env_mask": [e.env_mask for e in episodes],
            "env_reward": [e.reward for e in episodes],
            "resolved": [e.resolved for e in episodes],
            "forced_gold": [e.forced_gold for e in episodes],
        }

    def run_episodes(self, prompts: list[Any], model: Any) -> list[Episode]:
        """One episode per prompt entry with ``model`` acting (no trainer needed: the bench)."""
        episodes = self._runner.run(self._run_all(prompts, model))
        self.episodes += episodes
        return episodes

    async def _run_all(self, prompts: list[Any], model: Any) -> list[Episode]:
        seen: dict[str, int] = {}
        plan: list[tuple[Task, str, bool]] = []
        for i, prompt in enumerate(prompts):
            key = prompt_key(prompt)
            task = self.tasks.get(key)
            if task is None:
                raise KeyError(
                    f"rollout prompt {i} is not one of the dataset's tasks: {key[:80]!r}"
                )
            rank = seen.get(key, 0)
            seen[key] = rank + 1
            forced = rank % self.settings.num_generations < self.settings.force_gold
            plan.append((task, f"trl{self._calls}-{i}", forced))
        if not self.settings.batched:
            self.generator = None
            return [await self._episode(t, model, idx, forced) for t, idx, forced in plan]
        acting = sum(not forced for _, _, forced in plan)
        length = self.settings.static_cache_len
        gen = self.generator = BatchedGenerator(
            hf_batch_fn(
                model,
                self.tokenizer,
                temperature=self.settings.temperature,
                static=(min(acting, MAX_BATCH), length) if length and acting else None,
            ),
            max_batch=MAX_BATCH,
        )
        gen.expect(acting)

        async def one(task: Task, idx: str, forced: bool) -> Episode:
            try:
                return await self._episode(
                    task, model, idx, forced, generate=None if forced else gen.generate
                )
            finally:
                if not forced:
                    gen.finished()

        return list(await asyncio.gather(*(one(*p) for p in plan)))

    async def _episode(
        self,
        task: Task,
        model: Any,
        idx: str,
        forced: bool,
        *,
        generate: TokenGenerate | None = None,
    ) -> Episode:
        """One sample; ``generate`` (default: ``model`` in a worker thread) writes its turns."""
        s, tok = self.settings, self.tokenizer
        env = SWEEnv(task, idx=idx, config=self.env)
        agent = make_agent(s.scaffold, tool_format="text", workdir=task.workdir)
        if generate is None:

            async def generate(context: list[int], n: int) -> list[int]:
                return await asyncio.to_thread(self._generate, model, context, n)

        gold = GoldPatchPolicy() if forced else None
        turns = TrlTurns(self, agent, task, generate, gold)
        outcome = await EpisodeDriver(env, agent, max_turns=s.max_turns).run(turns)
        ids, mask = turns.ids, turns.mask
        if outcome.masked:
            mask = [0] * len(ids)
        if not ids:  # TRL needs one completion token per sample
            ids, mask = [tok.eos_token_id], [0]
        return Episode(
            task_id=task.id,
            prompt_ids=turns.prompt_ids,
            completion_ids=ids,
            env_mask=mask,
            reward=outcome.reward,
            resolved=bool(outcome.resolved),
            forced_gold=forced,
            turns=outcome.turns,
            stop=outcome.end_reason,
            infra_error=outcome.infra_error,
            hack_flags=list(outcome.hack_flags),
        )

    # -- tokens ------------------------------------------------------------------------
    def _render(self, messages: list[dict[str, Any]], generation_prompt: bool) -> str:
        msgs = [{"role": m["role"], "content": m.get("content") or ""} for m in messages]
        text = self.tokenizer.apply_chat_template(
            msgs, add_generation_prompt=generation_prompt, tokenize=False
        )
        return str(text)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _context_tokens(
        self, before: list[dict[str, Any]], after: list[dict[str, Any]], *, ended: bool
    ) -> list[int]:
        """Template tokens of the messages added since ``before`` (observation + next turn's header).

        ``before`` ends with the assistant turn just generated; its rendering ends with the
        end-of-turn token plus whatever the template writes after it, which the model did
        not generate (it stopped at the end-of-turn token), so that tail comes first.
        """
        old = self._render(before, False)
        new = self._render(after, True)
        if not new.startswith(old):  # the history elided something: render the new turns alone
            return self._encode(self._render(after[len(before) :], True))
        eos = str(self.tokenizer.eos_token)
        tail = old[old.rfind(eos) + len(eos) :] if ended and eos in old else ""
        return self._encode(tail + new[len(old) :])

    def _generate(self, model: Any, context: list[int], max_new_tokens: int) -> list[int]:
        import torch

        tok = self.tokenizer
        inp = torch.tensor([context], device=model.device)
        with torch.no_grad():
            out = model.generate(
                inp,
                attention_mask=torch.ones_like(inp),
                max_new_tokens=max_new_tokens,
                do_sample=True,
                temperature=self.settings.temperature,
                pad_token_id=tok.pad_token_id,
                eos_token_id=tok.eos_token_id,
            )
        new = [int(t) for t in out[0, len(context) :].tolist()]
        if tok.eos_token_id in new:
            new = new[: new.index(tok.eos_token_id) + 1]
        return new


class TrlTurns(Turns):
    """TRL's part of an episode: token ids in and out, observations as mask-0 template tokens.

    ``generate`` answers None once ``max_completion_tokens`` is spent.
    """

    def __init__(
        self,
        rollout: EpisodeRollout,
        agent: SWEAgent,
        task: Task,
        generate: TokenGenerate,
        gold: GoldPatchPolicy | None,
    ) -> None:
        self.r = rollout
        self.agent = agent
        self.gen = generate
        self.gold = gold
        self.ctx = EpisodeContext(task=task, scaffold=agent.scaffold, tool_format="text")
        self.prompt_ids: list[int] = []
        self.ids: list[int] = []
        self.mask: list[int] = []
        self._before: list[dict[str, Any]] = []
        self._ended = False

    async def generate(self) -> str | None:
        r, s = self.r, self.r.settings
        if not self.prompt_ids:
            self.prompt_ids = r._encode(r._render(self.agent.messages, True))
        budget = s.max_completion_tokens - len(self.ids)
        if budget <= 0:
            return None
        if self.gold is not None:
            reply = await self.gold.generate(self.agent.messages, tools=None, episode=self.ctx)
            new = [*r._encode(reply.content), r.tokenizer.eos_token_id]
        else:
            context = self.prompt_ids + self.ids
            new = await self.gen(context, min(budget, s.max_new_tokens_per_turn))
        new = new[:budget]
        self.ids, self.mask = self.ids + new, self.mask + [1] * len(new)
        self._ended = new[-1:] == [r.tokenizer.eos_token_id]
        return str(r.tokenizer.decode(new, skip_special_tokens=True))

    async def acted(self, action: Any) -> None:
        self._before = [dict(m) for m in self.agent.messages]  # ends with the assistant turn

    async def observed(self, step: EnvStep) -> None:
        r = self.r
        context = r._context_tokens(self._before, self.agent.messages, ended=self._ended)
        context = context[: max(0, r.settings.max_completion_tokens - len(self.ids))]
        self.ids, self.mask = self.ids + context, self.mask + [0] * len(context)
