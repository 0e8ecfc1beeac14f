"""Our verl agent loop, driven end to end on CPU.

verl instantiates the loop from its registry with ``hydra.utils.instantiate`` (as its
``AgentLoopWorker`` does); a stand-in server manager plays the model: it answers with
the token ids (from a real byte-level BPE tokenizer trained here) of the replies that
``GoldPatchPolicy`` writes, and records every prompt it was sent. The episode runs on a
bundled task in a real local sandbox and is graded by the real grader.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from conftest import require

pytestmark = require("verl", "cpu")


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from patchgym_agents import agent_scaffold
    from patchgym_envs import bundled_tasks
    from patchgym_trainer.testing.tiny_model import train_tokenizer

    corpus = []
    for task in bundled_tasks():
        corpus += [task.problem_statement, task.gold_patch]
    corpus += [agent_scaffold(n).system_prompt("text") for n in ("r2egym", "sweagent")]
    return train_tokenizer(corpus)


class StandInServer:
    """verl's server manager contract: ``generate(request_id, *, prompt_ids, sampling_params)``."""

    def __init__(self, tokenizer: Any, replies: Any) -> None:
        self.tokenizer = tokenizer
        self.replies = replies
        self.prompts: list[list[int]] = []
        self.outputs: list[list[int]] = []
        self.sampling: list[dict[str, Any]] = []

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        self.prompts.append(list(prompt_ids))
        self.sampling.append(dict(sampling_params))
        text = await self.replies()
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        ids.append(self.tokenizer.convert_tokens_to_ids("<|im_end|>"))
        self.outputs.append(ids)
        return TokenOutput(token_ids=ids, log_probs=[-0.25] * len(ids))


def gold_replies(task: Any, *, empty: bool = False) -> Any:
    from patchgym_agents import EpisodeContext, GoldPatchPolicy, agent_scaffold

    policy = GoldPatchPolicy(empty=empty)
    ctx = EpisodeContext(task=task, scaffold=agent_scaffold("r2egym"), tool_format="text")

    async def next_reply() -> str:
        reply = await policy.generate([], tools=None, episode=ctx)
        return reply.content

    return next_reply


def make_loop(tokenizer: Any, server: StandInServer, env_args: dict[str, Any]) -> Any:
    import hydra
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import (
        DictConfigWrap,
        ToolListWrap,
        _agent_loop_registry,
    )
    from verl.utils.dataset.rl_dataset import RLHFDataset

    import patchgym_trainer.engines.verl.agent_loop  # noqa: F401  (registers the loop)

    entry = {
        **_agent_loop_registry["patchgym_swe"],
        "env_args": env_args,
        "agent": {},
    }
    config = OmegaConf.create(
        {"actor_rollout_ref": {"rollout": {"prompt_length": 8192, "response_length": 16384}}}
    )
    return hydra.utils.instantiate(
        config=entry,
        trainer_config=DictConfigWrap(config=config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(OmegaConf.create({})),
        tools=ToolListWrap([]),
    )


def row_kwargs(task: Any) -> dict[str, Any]:
    from patchgym_envs import verl_row

    row = verl_row(task, 0, data_source="patchgym", split="train")
    return {"raw_prompt": row["prompt"], "extra_info": row["extra_info"], "index": 0}


ENV = {"sandbox": {"type": "local"}, "scaffold": "r2egym", "max_steps": 12}


async def test_gold_episode_tokens_masks_and_reward(tokenizer: Any) -> None:
    from patchgym_agents import SWEAgent
    from patchgym_envs import bundled_task

    task = bundled_task("semverlib")
    server = StandInServer(tokenizer, gold_replies(task))
    loop = make_loop(tokenizer, server, ENV)
    out = await loop.run({"temperature": 1.0, "top_p": 1.0}, **row_kwargs(task))

    # prompt: our scaffold's system prompt + the task, through the chat template
    agent = SWEAgent("r2egym", tool_format="text", workdir=task.workdir)
    agent.update_from_env(task.problem_statement, 0.0, False, {"workdir": task.workdir})
    expected_prompt = tokenizer.apply_chat_template(
        agent.messages, add_generation_prompt=True, tokenize=True
    )
    if isinstance(expected_prompt, Mapping):
        expected_prompt = expected_prompt["input_ids"]
    assert out.prompt_ids == list(expected_prompt)
    assert server.prompts[0] == out.prompt_ids

    # response: every model turn with mask 1, everything between with mask 0
    assert len(out.response_ids) == len(out.response_mask)
    ones = [t for t, m in zip(out.response_ids, out.response_mask, strict=True) if m == 1]
    assert ones == [t for ids in server.outputs for t in ids]
    zeros = [t for t, m in zip(out.response_ids, out.response_mask, strict=True) if m == 0]
    observations = tokenizer.decode(zeros)
    assert "<|im_start|>user" in observations
    assert "has been edited" in observations or "edited" in observations.lower()
    # each later prompt is exactly prompt + response so far (token in, token out)
    for sent in server.prompts[1:]:
        assert sent[: len(out.prompt_ids)] == out.prompt_ids
        assert sent == (out.prompt_ids + out.response_ids)[: len(sent)]
    assert out.response_logprobs is not None
    assert len(out.response_logprobs) == len(out.response_ids)
    assert all(
        lp == -0.25 for lp, m in zip(out.response_logprobs, out.response_mask, strict=True) if m
    )

    assert out.reward_score == 1.0
    assert out.extra_fields["reward_valid"] is True
    assert out.extra_fields["resolved"] is True
    assert out.extra_fields["stop_reason"] == "submitted"
    assert out.num_turns == 2 * len(server.outputs) + 1
    assert server.sampling[0]["max_tokens"] == 16384


async def test_empty_patch_scores_zero_but_trains(tokenizer: Any) -> None:
    from patchgym_envs import bundled_task

    task = bundled_task("intervals")
    server = StandInServer(tokenizer, gold_replies(task, empty=True))
    out = await make_loop(tokenizer, server, ENV).run({}, **row_kwargs(task))
    assert out.reward_score == 0.0
    assert out.extra_fields["reward_valid"] is True
    assert sum(out.response_mask) == len(server.outputs[0])


async def test_infra_failure_masks_the_sample(tokenizer: Any) -> None:
    from patchgym_envs import bundled_task

    task = bundled_task("semverlib").model_copy(update={"setup_commands": ["exit 7"]})
    server = StandInServer(tokenizer, gold_replies(task))
    out = await make_loop(tokenizer, server, ENV).run({}, **row_kwargs(task))
    assert out.extra_fields["reward_valid"] is False
    assert "exit 7" in out.extra_fields["infra_error"] or out.extra_fields["infra_error"]
    assert out.reward_score == 0.0
    assert set(out.response_mask) <= {0}


async def test_output_converts_like_verl_does(tokenizer: Any) -> None:
    from patchgym_envs import bundled_task

    task = bundled_task("csvlite")
    server = StandInServer(tokenizer, gold_replies(task))
    out = await make_loop(tokenizer, server, ENV).run({}, **row_kwargs(task))
    d = out.as_dict()
    assert d["responses"].shape == d["response_mask"].shape
    assert float(d["rm_scores"][-1]) == out.reward_score


async def test_samples_of_a_prompt_share_one_sandbox_group(tokenizer: Any) -> None:
    import asyncio

    from patchgym_envs import bundled_task
    from patchgym_trainer.engines.verl.agent_loop import shared_groups

    task = bundled_task("romanum")
    outs = await asyncio.gather(
        *(
            make_loop(tokenizer, StandInServer(tokenizer, gold_replies(task)), ENV).run(
                {}, **row_kwargs(task)
            )
            for _ in range(3)
        )
    )
    _, groups = shared_groups(ENV["sandbox"])
    assert groups.groups_made == 1  # the three samples' sandboxes were made as one group
    assert [o.reward_score for o in outs] == [1.0, 1.0, 1.0]
    assert all(o.extra_fields["sandbox_s"] > 0 for o in outs)
