"""One table of scripted episodes through every engine's adapter: same ends, rewards, masks.

Every adapter (the agents runner, the TRL rollout, verl's agent loop, both rLLM workflows)
runs :class:`patchgym_agents.driver.EpisodeDriver`; this test holds them to it. Each
scenario is a script of replies (the same text for every adapter; the token adapters get
it through a real byte-level BPE tokenizer) on a bundled task in a real local sandbox,
graded by the real grader. The rLLM row runs where rLLM imports
(``PYTHONPATH=/path/to/rllm``). Faults are real exceptions from a local sandbox that raises
when a command carries a marker (at a step) or when the grading sandbox starts.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
from conftest import has

from patchgym_agents import EpisodeContext, GoldPatchPolicy, Policy, agent_scaffold, run_episode
from patchgym_agents.agent import render_call
from patchgym_agents.driver import EndReason, hack_metrics
from patchgym_agents.types import ModelReply
from patchgym_envs import EnvConfig, Task, ToolCall, bundled_task
from patchgym_sandbox import SandboxClosed, SandboxLost
from patchgym_sandbox.local.backend import LocalBackend, LocalSandbox
from patchgym_sandbox.local.config import LocalConfig
from patchgym_sandbox.result import ExecResult
from patchgym_sandbox.sandbox import ExecRequest

LOST, CLOSED = "PATCHGYM_FAULT_LOST", "PATCHGYM_FAULT_CLOSED"
GIT_ALL = "git log --all --oneline | head -3"


class FaultyConfig(LocalConfig):
    """The local backend, with faults on demand (see the module docstring)."""

    fail_grading: Literal["lost", "closed"] | None = None

    def build(self) -> LocalBackend:
        return FaultyBackend(self)


class FaultyBackend(LocalBackend):
    def _make_sandbox(self, spec: Any) -> LocalSandbox:
        sandbox = FaultySandbox(self, spec)
        sandbox.fail_grading = getattr(self.config, "fail_grading", None)
        return sandbox


class FaultySandbox(LocalSandbox):
    fail_grading: str | None = None

    async def _start(self) -> None:
        fail = self.fail_grading
        if fail and (self.spec.rollout_id or "").endswith("-grade"):
            raise (SandboxLost if fail == "lost" else SandboxClosed)(f"grading sandbox: {fail}")
        await super()._start()

    async def _exec(self, req: ExecRequest) -> ExecResult:
        if LOST in req.cmd:
            raise SandboxLost(f"sandbox {self.id} is gone")
        if CLOSED in req.cmd:
            raise SandboxClosed(f"sandbox {self.id} is closed")
        return await super()._exec(req)


NextReply = Callable[[], Awaitable[str]]


def gold(empty: bool = False) -> Callable[[Task], NextReply]:
    def script(task: Task) -> NextReply:
        policy = GoldPatchPolicy(empty=empty)
        ctx = EpisodeContext(task=task, scaffold=agent_scaffold("r2egym"), tool_format="text")

        async def next_reply() -> str:
            return (await policy.generate([], tools=None, episode=ctx)).content

        return next_reply

    return script


def always(text: str) -> Callable[[Task], NextReply]:
    def script(task: Task) -> NextReply:
        async def next_reply() -> str:
            return text

        return next_reply

    return script


def bash(cmd: str) -> str:
    return "Let me look.\n" + render_call(ToolCall(name="execute_bash", arguments={"cmd": cmd}))


@dataclass(frozen=True)
class Scenario:
    name: str
    script: Callable[[Task], NextReply]
    end: EndReason
    reward: float | None
    max_steps: int = 12
    max_turns: int = 12
    fail_grading: Literal["lost", "closed"] | None = None
    task: str = "semverlib"
    flags: tuple[str, ...] = ()
    """The hack flags every engine must report (and log as ``hack/*``)."""


SCENARIOS = [
    Scenario("submit_resolved", gold(), EndReason.SUBMITTED, 1.0),
    Scenario("submit_unresolved", gold(empty=True), EndReason.SUBMITTED, 0.0),
    Scenario("max_turns", always(bash("ls")), EndReason.MAX_TURNS, 0.0, max_steps=2, max_turns=2),
    Scenario("format_error", always("no tool call here"), EndReason.FORMAT_ERROR, 0.0, max_steps=2),
    Scenario(
        "git_outside_head",
        always(bash(GIT_ALL)),
        EndReason.MAX_TURNS,
        0.0,
        max_steps=2,
        max_turns=2,
        flags=("git_outside_head",),
    ),
    Scenario("infra_at_step", always(bash(f"echo {LOST}")), EndReason.INFRA, None),
    Scenario("sandbox_closed_at_step", always(bash(f"echo {CLOSED}")), EndReason.INFRA, None),
    Scenario("infra_at_grading", gold(), EndReason.INFRA, None, fail_grading="lost"),
    Scenario(
        "infra_at_grading_after_cutoff",
        always(bash("ls")),
        EndReason.INFRA,
        None,
        max_steps=5,
        max_turns=1,
        fail_grading="lost",
    ),
    Scenario(
        "sandbox_closed_at_grading_after_cutoff",
        always(bash("ls")),
        EndReason.INFRA,
        None,
        max_steps=5,
        max_turns=1,
        fail_grading="closed",
    ),
]


@dataclass(frozen=True)
class Seen:
    """What an adapter reported, in common terms."""

    end: str
    reward: float | None
    masked: bool
    flags: tuple[str, ...] | None = None
    """The hack flags as the engine reports them (None: this adapter does not say)."""


def env_config(sc: Scenario, tmp_path: Path) -> EnvConfig:
    sandbox = FaultyConfig(state_dir=tmp_path / "sb", fail_grading=sc.fail_grading)
    return EnvConfig(sandbox=sandbox, scaffold="r2egym", max_steps=sc.max_steps, run_id="t")


class ScriptPolicy(Policy):
    name = "script"

    def __init__(self, script: Callable[[Task], NextReply]) -> None:
        self.script = script

    async def generate(
        self, messages: list[dict[str, Any]], *, tools: Any, episode: EpisodeContext
    ) -> ModelReply:
        nxt = episode.state.setdefault("next", self.script(episode.task))
        return ModelReply(content=await nxt())


async def run_agents(sc: Scenario, task: Task, tmp_path: Path, tokenizer: Any) -> Seen:
    res = await run_episode(
        task,
        ScriptPolicy(sc.script),
        env=env_config(sc, tmp_path),
        tool_format="text",
        max_turns=sc.max_turns,
    )
    assert res.end_reason is not None, res
    flags = tuple((res.verdict or {}).get("flags") or ()) if res.status == "graded" else ()
    return Seen(res.end_reason.value, res.reward, res.status != "graded", flags)


async def run_trl(sc: Scenario, task: Task, tmp_path: Path, tokenizer: Any) -> Seen:
    from patchgym_trainer.engines.trl.rollout import EpisodeRollout, RolloutSettings

    settings = RolloutSettings(
        scaffold="r2egym",
        max_turns=sc.max_turns,
        max_new_tokens_per_turn=4096,
        max_completion_tokens=65536,
    )
    r = EpisodeRollout([task], env=env_config(sc, tmp_path), settings=settings, tokenizer=tokenizer)
    nxt = sc.script(task)

    async def generate(context: list[int], n: int) -> list[int]:
        ids: list[int] = tokenizer.encode(await nxt(), add_special_tokens=False)
        return [*ids, tokenizer.eos_token_id]

    try:
        ep = await r._episode(task, None, "trl-0", False, generate=generate)
    finally:
        r.close()
    masked = ep.reward is None
    assert not masked or not any(ep.env_mask)
    return Seen(ep.stop.value, ep.reward, masked, tuple(ep.hack_flags))


async def verl_output(sc: Scenario, task: Task, tmp_path: Path, tokenizer: Any) -> Any:
    """The ``AgentLoopOutput`` of our verl agent loop for one scenario."""
    from test_agent_loop import StandInServer, make_loop, row_kwargs

    server = StandInServer(tokenizer, sc.script(task))
    loop = make_loop(tokenizer, server, {"sandbox": {"type": "local"}, "scaffold": "r2egym"})
    loop.env = env_config(sc, tmp_path)  # a config object hydra could not carry
    loop.max_turns = sc.max_turns
    return await loop.run({}, **row_kwargs(task))


async def run_verl(sc: Scenario, task: Task, tmp_path: Path, tokenizer: Any) -> Seen:
    out = await verl_output(sc, task, tmp_path, tokenizer)
    valid = out.extra_fields["reward_valid"]
    assert valid or not any(out.response_mask)
    hack = out.extra_fields["reward_extra_info"]
    assert {k: out.extra_fields[k] for k in hack} == hack and set(hack) == set(hack_metrics([]))
    flags = tuple(k.removeprefix("hack/") for k, v in hack.items() if v and k != "hack/any")
    assert hack["hack/any"] == float(bool(flags))
    reward = out.reward_score if valid else None
    return Seen(out.extra_fields["stop_reason"], reward, not valid, flags)


async def run_rllm(
    sc: Scenario, task: Task, tmp_path: Path, tokenizer: Any, *, multi_turn: bool = False
) -> Seen:
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    from rllm.workflows.workflow import TerminationEvent, TerminationReason

    from patchgym_trainer.engines.infra_rule import InfraEpisodeError
    from patchgym_trainer.engines.rllm.env_agent import PatchgymSWEAgent, PatchgymSWEEnv
    from patchgym_trainer.engines.rllm.workflow import (
        TERMINATION,
        PatchgymMultiTurnWorkflow,
        PatchgymSWEWorkflow,
    )

    nxt = sc.script(task)

    class StandInEngine:
        """rLLM's rollout engine contract: ``get_model_response(messages, **kw)``."""

        async def get_model_response(self, messages: Any, **_: Any) -> Any:
            return SimpleNamespace(text=await nxt(), finish_reason="stop")

    cfg = env_config(sc, tmp_path)
    env_args = {"sandbox": cfg.sandbox, "max_steps": sc.max_steps, "run_id": "t"}
    with ThreadPoolExecutor(1) as pool:
        common = {"rollout_engine": StandInEngine(), "executor": pool, "max_steps": sc.max_turns}
        wf: Any
        if multi_turn:
            wf = PatchgymMultiTurnWorkflow(
                agent_cls=PatchgymSWEAgent,
                env_cls=PatchgymSWEEnv,
                agent_args={"scaffold": "r2egym"},
                env_args={**env_args, "scaffold": "r2egym"},
                **common,
            )
        else:
            wf = PatchgymSWEWorkflow(env_args=env_args, **common)
        try:
            await wf.run(task.to_row(), "rllm-0")
        except InfraEpisodeError:
            assert wf.agent.trajectory.steps == []  # what rLLM's engines drop
            return Seen(EndReason.INFRA.value, None, True)
        except TerminationEvent as event:
            expected = TERMINATION.get(sc.end, TerminationReason.ENV_DONE)
            end = sc.end.value if event.reason == expected else f"rllm:{event.reason}"
            return Seen(end, wf.agent.trajectory.reward, False)
    raise AssertionError("the workflow returned without a termination event")


async def run_rllm_multi_turn(sc: Scenario, task: Task, tmp_path: Path, tokenizer: Any) -> Seen:
    return await run_rllm(sc, task, tmp_path, tokenizer, multi_turn=True)


ADAPTERS: dict[str, tuple[Callable[..., Awaitable[Seen]], tuple[str, ...]]] = {
    "agents": (run_agents, ()),
    "trl": (run_trl, ("transformers", "tokenizers")),
    "verl": (run_verl, ("verl", "tokenizers")),
    "rllm": (run_rllm, ("rllm",)),
    "rllm_multi_turn": (run_rllm_multi_turn, ("rllm",)),
}


def importable(module: str) -> bool:
    """Installed and importable with its own dependencies (this test leaves ``sys.path`` be:
    rLLM is not on PyPI, put a checkout on ``PYTHONPATH``)."""
    if not has(module):
        return False
    try:
        importlib.import_module(module if module != "rllm" else "rllm.workflows.workflow")
    except ImportError:
        return False
    return True


def script_tokenizer() -> Any:
    """A byte-level BPE tokenizer trained on every scenario's text (None without tokenizers)."""
    if not has("tokenizers") or not has("transformers"):
        return None
    from patchgym_envs import bundled_tasks
    from patchgym_trainer.testing.tiny_model import train_tokenizer

    corpus = [bash("ls"), bash(f"echo {LOST}"), bash(f"echo {CLOSED}"), bash(GIT_ALL)]
    corpus.append("no tool call here")
    for t in bundled_tasks():
        corpus += [t.problem_statement, t.gold_patch]
    corpus += [agent_scaffold(n).system_prompt("text") for n in ("r2egym", "sweagent")]
    return train_tokenizer(corpus)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return script_tokenizer()


@pytest.mark.parametrize("adapter", list(ADAPTERS))
@pytest.mark.parametrize("sc", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_every_adapter_ends_alike(
    adapter: str, sc: Scenario, tmp_path: Path, tokenizer: Any
) -> None:
    run, needs = ADAPTERS[adapter]
    missing = [m for m in needs if not importable(m)]
    if missing:
        rllm = adapter.startswith("rllm")
        how = "put an rLLM checkout on PYTHONPATH" if rllm else "sync with --extra cpu"
        pytest.skip(f"{adapter} adapter needs {', '.join(missing)}: {how}")
    seen = await run(sc, bundled_task(sc.task), tmp_path, tokenizer)
    flags = sc.flags if seen.flags is not None else None
    assert seen == Seen(sc.end.value, sc.reward, sc.reward is None, flags), (adapter, sc.name)
    assert not list((tmp_path / "sb").glob("*/record.json"))  # every sandbox was closed
