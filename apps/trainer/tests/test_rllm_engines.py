"""rLLM's own engines drive our env and agent over bundled tasks (runs only where rLLM imports).

rLLM is not on PyPI, so CI skips this module. Run it against a checkout:

    RLLM_SRC=/path/to/rllm uv run pytest apps/trainer/tests/test_rllm_engines.py

(rLLM's own dependencies must be importable: torch, transformers, pandas, polars, ...).
A scripted OpenAI-compatible server plays one policy per task; every case runs on the
local backend with its own state folder, which must be empty at the end:

- gold patch -> reward 1; empty patch -> reward 0;
- sandbox lost (setup fails: an ``InfraError``) -> never a trained 0 (infra_rule):
  v0.2's ``AgentExecutionEngine`` retries and then raises; the workflow engines end it as
  ``TerminationReason.ERROR`` with no steps (what ``transform_results_for_verl`` drops);
- max turns with the fix applied but never submitted -> graded (reward 1).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

RLLM_SRC = os.environ.get("RLLM_SRC")


def _import_problem(*modules: str) -> str | None:
    """Why ``modules`` do not import (None: they do), probed in a child interpreter so
    that collecting this file imports nothing: rLLM in ``sys.modules`` would change what
    other test modules see (the registry tests' stand-in ``rllm``)."""
    probe = "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)"
    path = [p for p in (RLLM_SRC, os.environ.get("PYTHONPATH")) if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    done = subprocess.run(
        [sys.executable, "-c", probe, *modules], env=env, capture_output=True, text=True
    )
    if done.returncode == 0:
        return None
    return (done.stderr.strip().splitlines() or ["(no output)"])[-1]


def _rllm_problem() -> str | None:
    path = [RLLM_SRC, *sys.path] if RLLM_SRC else None
    if importlib.machinery.PathFinder.find_spec("rllm", path) is None:
        return "rLLM is not importable: set RLLM_SRC=/path/to/rllm checkout (not on PyPI)"
    problem = _import_problem("rllm.workflows.workflow", "rllm.environments.base.base_env")
    return problem and f"rLLM found but its dependencies do not import here: {problem}"


SKIP = _rllm_problem()
pytestmark = pytest.mark.skipif(SKIP is not None, reason=SKIP or "")


@pytest.fixture(scope="module", autouse=True)
def rllm_importable() -> Iterator[None]:
    """rLLM on ``sys.path`` for this module's tests only: what they imported from it (and
    our adapters bound to it) is forgotten afterwards, so test order does not matter."""
    before = set(sys.modules)
    if RLLM_SRC:
        sys.path.insert(0, RLLM_SRC)
    try:
        yield
    finally:
        if RLLM_SRC and RLLM_SRC in sys.path:
            sys.path.remove(RLLM_SRC)
        for name in set(sys.modules) - before:
            if name.split(".")[0] == "rllm" or name.startswith("patchgym_trainer.engines.rllm."):
                del sys.modules[name]


def has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


CASES = {
    "gold": "csvlite",
    "empty": "intervals",
    "infra": "semverlib",
    "max_turns": "romanum",
}


def gold_script(name: str, *, empty: bool = False) -> list[str]:
    """The gold policy's replies for a bundled task, up to and including its submit."""
    from patchgym_agents import EpisodeContext, GoldPatchPolicy, agent_scaffold
    from patchgym_envs import bundled_task

    policy = GoldPatchPolicy(empty=empty)
    ctx = EpisodeContext(
        task=bundled_task(name), scaffold=agent_scaffold("r2egym"), tool_format="text"
    )

    async def go() -> list[str]:
        out: list[str] = []
        for _ in range(20):
            out.append((await policy.generate([], tools=None, episode=ctx)).content)
            if "<function=finish>" in out[-1]:
                return out
        raise AssertionError("gold policy never submits")

    return asyncio.run(go())


def rows() -> dict[str, dict[str, Any]]:
    from patchgym_envs import bundled_task

    out = {case: bundled_task(name).to_row() for case, name in CASES.items()}
    out["infra"] = (
        bundled_task(CASES["infra"]).model_copy(update={"setup_commands": ["exit 7"]}).to_row()
    )
    return out


def scripts() -> tuple[list[Any], int]:
    """The policy per case, and the turn budget that makes ``max_turns`` stop unsubmitted."""
    from scripted_policy_server import Script

    from patchgym_envs import bundled_task

    edits = gold_script(CASES["max_turns"])[:-1]
    return [
        Script(bundled_task(CASES["gold"]).problem_statement, gold_script(CASES["gold"])),
        Script(
            bundled_task(CASES["empty"]).problem_statement,
            gold_script(CASES["empty"], empty=True),
        ),
        Script(bundled_task(CASES["infra"]).problem_statement, gold_script(CASES["infra"])),
        Script(bundled_task(CASES["max_turns"]).problem_statement, edits),
    ], len(edits) + 1


def live_sandboxes(sandbox: dict[str, Any]) -> list[Any]:
    from patchgym_sandbox import create_backend

    async def go() -> list[Any]:
        backend = create_backend(sandbox)
        try:
            return list(await backend.list_sandboxes())
        finally:
            await backend.aclose()

    return asyncio.run(go())


@pytest.fixture
def sandbox(tmp_path: Path) -> dict[str, Any]:
    return {"type": "local", "state_dir": str(tmp_path / "state")}


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    if not has_module("transformers") or not has_module("tokenizers"):
        pytest.skip("transformers/tokenizers not installed (v0.2's engine tokenizes)")
    from patchgym_trainer.testing.tiny_model import train_tokenizer

    tok = train_tokenizer()
    tok.name_or_path = "tiny-qwen"  # rLLM picks its Qwen (ChatML) parser by this name
    return tok


# -- rLLM v0.2.x: AgentExecutionEngine ------------------------------------------------------


def test_v02_agent_execution_engine(sandbox: dict[str, Any], tokenizer: Any) -> None:
    if not has_module("rllm.engine.agent_execution_engine"):
        pytest.skip("this rLLM has no AgentExecutionEngine (v0.2.x only)")
    from rllm.engine.agent_execution_engine import AgentExecutionEngine
    from scripted_policy_server import PolicyServer

    from patchgym_trainer.engines.rllm.env_agent import PatchgymSWEAgent, PatchgymSWEEnv

    policy, turns = scripts()
    data = rows()

    def engine(url: str, **kw: Any) -> Any:
        return AgentExecutionEngine(
            engine_name="openai",
            tokenizer=tokenizer,
            rollout_engine_args={"model": "scripted", "base_url": url, "api_key": "x"},
            agent_class=PatchgymSWEAgent,
            env_class=PatchgymSWEEnv,
            agent_args={"scaffold": "r2egym"},
            env_args={"sandbox": sandbox},
            max_steps=turns,
            max_prompt_length=60_000,
            max_response_length=60_000,
            n_parallel_agents=3,
            max_workers=3,
            **kw,
        )

    with PolicyServer(policy) as server:
        eng = engine(server.base_url)
        trajs = asyncio.run(eng.execute_tasks([data["gold"], data["empty"], data["max_turns"]]))
        gold, empty, max_turns = trajs
        assert gold.reward == 1.0 and gold.steps[-1].info["resolved"] is True
        assert empty.reward == 0.0 and empty.steps[-1].info["reward_valid"] is True
        assert max_turns.reward == 1.0  # graded by compute_final_reward, never submitted
        import json

        for t in trajs:
            json.dumps(t.to_dict(), default=str)  # Step.action is a JSON value
            assert all(isinstance(s.action, (dict, str)) for s in t.steps)

        # sandbox lost: the engine's retry loop reruns it, then raises; nothing scored 0
        eng = engine(server.base_url, retry_limit=2)
        env = PatchgymSWEEnv.from_dict({**data["infra"], "sandbox": sandbox})
        eng.update_envs_and_agents([env], [PatchgymSWEAgent("r2egym")])

        async def collect() -> list[Any]:
            return [t async for t in eng.trajectory_generator(mode="Text")]

        with pytest.raises(Exception, match="cannot complete"):
            asyncio.run(collect())
        served = next(s for s in policy if s.marker in data["infra"]["problem_statement"])
        assert served.served.count(0) == 2  # two attempts, each failing at its first step
    assert live_sandboxes(sandbox) == []


# -- current rLLM (and v0.2.1's) workflow engines ------------------------------------------


def rollout_engine(url: str) -> Any:
    from rllm.engine.rollout.openai_engine import OpenAIEngine

    return OpenAIEngine(
        model="scripted",
        base_url=url,
        api_key="x",
        max_prompt_length=60_000,
        max_response_length=4096,
    )


def check_episodes(episodes: list[Any], order: list[str]) -> None:
    from rllm.workflows.workflow import TerminationReason

    by = dict(zip(order, episodes, strict=True))
    traj = {k: ep.trajectories[0] for k, ep in by.items() if k != "infra"}
    assert by["gold"].termination_reason == TerminationReason.ENV_DONE
    assert traj["gold"].reward == 1.0 and by["gold"].is_correct
    assert by["empty"].termination_reason == TerminationReason.ENV_DONE
    assert traj["empty"].reward == 0.0 and traj["empty"].steps
    assert by["max_turns"].termination_reason == TerminationReason.MAX_TURNS_EXCEEDED
    assert traj["max_turns"].reward == 1.0  # graded at the cutoff
    infra = by["infra"]
    assert infra.termination_reason == TerminationReason.ERROR
    assert infra.info["error"]["error_type"] == "InfraEpisodeError"
    assert "SetupFailed" in infra.info["error"]["error_message"]
    # what AgentWorkflowEngine.transform_results_for_verl drops from the batch
    assert all(len(t.steps) == 0 for t in infra.trajectories)


WORKFLOW_ENGINES = [
    pytest.param("rllm.engine.agent_workflow_engine", "AgentWorkflowEngine", id="agent"),
    pytest.param("rllm.engine.unified_workflow_engine", "UnifiedWorkflowEngine", id="unified"),
]


@pytest.mark.parametrize(("module", "cls"), WORKFLOW_ENGINES)
@pytest.mark.parametrize("workflow", ["patchgym", "multi_turn"])
def test_workflow_engines(sandbox: dict[str, Any], module: str, cls: str, workflow: str) -> None:
    if not has_module(module):
        pytest.skip(f"this rLLM has no {module}")
    engine_cls = getattr(importlib.import_module(module), cls)
    from scripted_policy_server import PolicyServer

    from patchgym_trainer.engines.rllm.env_agent import PatchgymSWEAgent, PatchgymSWEEnv
    from patchgym_trainer.engines.rllm.workflow import (
        PatchgymMultiTurnWorkflow,
        PatchgymSWEWorkflow,
    )

    policy, turns = scripts()
    data = rows()
    order = ["gold", "empty", "infra", "max_turns"]
    if workflow == "patchgym":
        wf_cls: Any = PatchgymSWEWorkflow
        wf_args: dict[str, Any] = {"env_args": {"sandbox": sandbox}, "max_steps": turns}
    else:
        wf_cls = PatchgymMultiTurnWorkflow
        wf_args = {
            "agent_cls": PatchgymSWEAgent,
            "env_cls": PatchgymSWEEnv,
            "agent_args": {"scaffold": "r2egym"},
            "env_args": {"sandbox": sandbox},
            "max_steps": turns,
        }
    with PolicyServer(policy) as server:
        eng = engine_cls(
            workflow_cls=wf_cls,
            workflow_args=wf_args,
            rollout_engine=rollout_engine(server.base_url),
            n_parallel_tasks=2,
            retry_limit=2,
            raise_on_error=False,
        )
        episodes = asyncio.run(eng.execute_tasks([data[k] for k in order]))
        check_episodes(episodes, order)
        served = next(s for s in policy if s.marker in data["infra"]["problem_statement"])
        assert served.served.count(0) == 2  # retried once, then kept as ERROR
    assert live_sandboxes(sandbox) == []


def test_rllm_prompts_match_rllm_swe_agent() -> None:
    """``prompts="rllm"`` builds the same first two messages as rLLM's own SWEAgent."""
    if not has_module("rllm.agents.swe_agent"):
        pytest.skip("this rLLM has no rllm.agents.swe_agent (v0.2.x only)")
    from rllm.agents.swe_agent import SWEAgent as TheirAgent

    from patchgym_agents import SWEAgent

    for scaffold, fn in (("r2egym", False), ("r2egym", True), ("sweagent", False)):
        theirs = TheirAgent(use_fn_calling=fn, scaffold=scaffold)
        ours = SWEAgent(scaffold, use_fn_calling=fn, prompts="rllm")
        theirs.update_from_env("Fix the bug.", 0.0, False, {"max_steps": 5})
        ours.update_from_env("Fix the bug.", 0.0, False, {"max_steps": 5})
        assert ours.chat_completions[:2] == theirs.chat_completions[:2], (scaffold, fn)


def test_registered_dataset_loads_through_rllm_registry(tmp_path: Path) -> None:
    """``patchgym datasets register`` output, read back by this rLLM's ``DatasetRegistry``."""
    import uuid

    if problem := _import_problem("rllm.data.dataset"):
        pytest.skip(f"rLLM's DatasetRegistry does not import here (it needs polars): {problem}")

    name = f"pg_test_{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "RLLM_HOME": str(tmp_path / "home")}
    if RLLM_SRC:
        env["PYTHONPATH"] = os.pathsep.join([RLLM_SRC, env.get("PYTHONPATH", "")])
    reg = [sys.executable, "-m", "patchgym_trainer", "datasets", "register", name]
    done = subprocess.run(reg, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "v0.2 registry" in done.stdout
    probe = (
        "from rllm.data.dataset import DatasetRegistry as R\n"
        f"d = R.load_dataset({name!r}, 'train')\n"
        "print(len(d), d.get_verl_data_path())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    rows, verl = out.stdout.split()[-2:]
    assert int(rows) == 6 and verl.endswith("train_verl.parquet")
