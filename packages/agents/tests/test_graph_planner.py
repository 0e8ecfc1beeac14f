"""graph-planner: JSON action parsing, the rule-based fallback, memory under elision, rollouts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchgym_agents import (
    ContextBudget,
    GoldPatchPolicy,
    GraphPlannerAgent,
    ModelReply,
    RolloutConfig,
    RulePlanner,
    RulePlannerPolicy,
    ScriptedPolicy,
    Trajectory,
    make_agent,
    parse_graph_reply,
    rollout,
    run_episode,
)
from patchgym_agents.envs_api import bundled_task, bundled_tasks
from patchgym_agents.graph_planner.anchors import extract_anchors
from patchgym_agents.policies.diffs import parse_diff
from patchgym_agents.rollout import ResultStore
from patchgym_sandbox import SandboxBackend

EXPLORE = {"action": "explore", "op": "name", "query": "to_roman"}


@pytest.mark.parametrize(
    ("reply", "name", "args", "error"),
    [
        (json.dumps(EXPLORE), "explore", {"op": "name", "query": "to_roman"}, None),
        (
            "Let me look.\n```json\n" + json.dumps(EXPLORE) + "\n```\nthen decide",
            "explore",
            {"op": "name", "query": "to_roman"},
            None,
        ),
        (
            "<think>the table {maybe}</think>" + json.dumps({"action": "submit"}),
            "submit",
            {},
            None,
        ),
        (
            '{"action": "memory", "note": "x", "nodes": "a.b, c"}',
            "memory",
            {"op": "record", "note": "x", "nodes": ["a.b", "c"]},
            None,
        ),
        (
            "<function=explore>\n<parameter=query>wrap</parameter>\n</function>",
            "explore",
            {"op": "name", "query": "wrap"},
            None,
        ),
        ("I will explore the code now.", None, None, "no JSON action found"),
        ('{"action": "explore", "query": "x",}', None, None, "no valid JSON object"),
        ('{"action": "explore", "op": "grep", "query": "x"}', None, None, "op: Input should be"),
        ('{"action": "repair", "plan": "fix"}', None, None, "targets: Field required"),
        ('{"action": "delete"}', None, None, "unknown action 'delete'"),
        ("<think>still thinking {", None, None, "ended inside a <think> block"),
    ],
)
def test_parse_graph_reply(
    reply: str, name: str | None, args: dict[str, object] | None, error: str | None
) -> None:
    parsed = parse_graph_reply(reply)
    if error is None:
        assert parsed.ok and parsed.call is not None, parsed.error
        assert parsed.call.name == name and parsed.call.arguments == args
    else:
        assert not parsed.ok and parsed.error is not None and error in parsed.error, parsed.error


def test_two_actions_in_one_reply_runs_the_first() -> None:
    parsed = parse_graph_reply(json.dumps(EXPLORE) + "\n" + json.dumps({"action": "submit"}))
    assert parsed.ok and parsed.call is not None and parsed.call.name == "explore"
    assert parsed.extra_calls == 1


def test_anchors_and_planner_are_deterministic() -> None:
    issue = bundled_task("csvlite").problem_statement
    anchors = [(a.text, a.kind) for a in extract_anchors(issue)]
    assert anchors[0] == ("parse_line", "name")
    assert ("quote inside an unquoted field at column 6", "message") in anchors
    runs = []
    for _ in range(2):
        planner = RulePlanner(issue)
        runs.append([planner.next_action().model_dump() for _ in range(3)])
    assert runs[0] == runs[1]
    assert runs[0][0] == {
        "action": "explore",
        "op": "name",
        "query": "parse_line",
        "depth": 1,
        "limit": 6,
    }


def test_system_prompt_has_the_schema_and_memory_survives_elision() -> None:
    agent = make_agent("graph_planner", budget=ContextBudget(max_tokens=400, keep_last=2))
    assert isinstance(agent, GraphPlannerAgent) and agent.tools is None
    agent.update_from_env("Fix `wrap`.", 0.0, False, {"workdir": "/testbed"})
    system = agent.chat_completions[0]["content"]
    assert '"discriminator"' in system and '"explore"' in system and "/testbed" in system
    big = "x" * 3000
    for i in range(4):
        agent.update_from_model(json.dumps(EXPLORE))
        agent.update_from_env(f"{big}\n\n## Memory (1)\n[m1] finding {i}", 0.0, False, {})
    rendered = agent.chat_completions
    assert agent._history.elided >= 2
    assert "[m1] finding 3" in rendered[-1]["content"]


async def test_gold_patch_through_repair_resolves_every_bundled_task(
    backend: SandboxBackend, tmp_path: Path
) -> None:
    tasks = bundled_tasks()
    summary = await rollout(
        tasks,
        GoldPatchPolicy(),
        RolloutConfig(
            env={"scaffold": "graph-planner"}, concurrency=3, output_dir=tmp_path, progress=False
        ),
        backend=backend,
    )
    assert summary.graded == summary.resolved == len(tasks), summary
    assert summary.format_errors == 0 and summary.fallback_steps == 0
    assert summary.leaked_sandboxes == []
    for res in ResultStore(tmp_path).load().values():
        steps = res.trajectory["steps"]
        assert [s["action"]["name"] for s in steps] == ["repair", "submit"]
        assert json.loads(steps[0]["model_response"])["action"] == "repair"
        assert "diff applied (git apply)" in steps[0]["info"]["next_observation"]


async def test_malformed_json_takes_a_fallback_step(backend: SandboxBackend) -> None:
    task = bundled_task("romanum")
    script = [
        '{"action": "explore", "query": "to_roman",',  # broken JSON
        json.dumps({"action": "explore", "op": "tests", "query": "romanum.convert.to_roman"}),
        json.dumps({"action": "explore", "op": "grep", "query": "x"}),  # invalid field
        json.dumps(
            {
                "action": "repair",
                "targets": ["romanum.convert.to_roman"],
                "edits": [
                    {
                        "path": "romanum/convert.py",
                        "search": '    (1000, "M"),\n',
                        "replace": '    (1000, "M"),\n    (900, "CM"),\n',
                    }
                ],
            }
        ),
        json.dumps({"action": "submit"}),
    ]
    res = await run_episode(
        task, ScriptedPolicy(script), env={"scaffold": "graph-planner"}, backend=backend
    )
    assert res.status == "graded" and res.resolved, res
    assert res.model_steps == res.steps == 5 and res.format_errors == 2
    info = res.trajectory["info"]
    assert info["fallback_steps"] == 2 and info["fallback_rate"] == 2 / 5
    steps = Trajectory.from_rllm(res.trajectory).steps
    assert [s.info["fallback"] for s in steps] == [True, False, True, False, False]
    first = steps[0]
    assert first.action["name"] == "explore"  # the planner's first anchor
    assert first.next_observation is not None
    assert first.next_observation.startswith("NOTE: your reply could not be used")
    assert "• romanum.convert" in first.next_observation  # and the step really ran
    assert (
        steps[2].next_observation is not None and "op: Input should be" in steps[2].next_observation
    )


async def test_rule_planner_without_a_model(backend: SandboxBackend, tmp_path: Path) -> None:
    tasks = bundled_tasks()
    summary = await rollout(
        tasks,
        RulePlannerPolicy(),
        RolloutConfig(
            env={"scaffold": "graph-planner"}, concurrency=3, output_dir=tmp_path, progress=False
        ),
        backend=backend,
    )
    assert summary.graded == len(tasks) and summary.infra_failed == 0
    assert summary.fallback_rate == 1.0 and summary.format_errors == 0
    assert summary.leaked_sandboxes == []
    by_task = {t.id: t for t in tasks}
    for res in ResultStore(tmp_path).load().values():
        names = [s["action"]["name"] for s in res.trajectory["steps"]]
        assert names[0] == "explore" and names[-1] == "submit"
        assert {"memory", "repair"} <= set(names)
        # the candidates it recorded include a node of the module the fix touches
        memory = next(s for s in res.trajectory["steps"] if s["action"]["name"] == "memory")
        fixed = {f.path[:-3].replace("/", ".") for f in parse_diff(by_task[res.task_id].gold_patch)}
        nodes = memory["action"]["arguments"]["nodes"]
        assert any(n.startswith(m) for n in nodes for m in fixed), (res.task_id, nodes)
        repair = next(s for s in res.trajectory["steps"] if s["action"]["name"] == "repair")
        assert "ran tests importing the targets" in repair["info"]["next_observation"]


def test_agent_native_tool_calls_are_validated() -> None:
    agent = GraphPlannerAgent(tool_format="native")
    assert agent.tools is not None and [t["function"]["name"] for t in agent.tools] == [
        "explore",
        "memory",
        "repair",
        "submit",
    ]
    agent.update_from_env("Fix `wrap`.", 0.0, False, {})
    bad = ModelReply(
        tool_calls=[
            {"id": "c1", "type": "function", "function": {"name": "repair", "arguments": "{}"}}
        ]
    )
    action = agent.update_from_model(bad)
    assert agent.fallback_steps == 1 and not action.malformed
    assert action.action.name == "explore"  # type: ignore[union-attr]


async def test_graph_planner_on_docker(tmp_path: Path) -> None:
    """The in-sandbox script runs on the image's own python3 (a real container)."""
    import asyncio

    from test_runner_docker import _docker_ready

    from patchgym_envs.bundled.docker import build_image
    from patchgym_sandbox.testing import engine_missing

    if (reason := _docker_ready()) is not None:
        engine_missing(reason)
    tasks = bundled_tasks()[:2]
    for task in tasks:
        await asyncio.to_thread(build_image, str(task.metadata["bundled_name"]))
    for policy in (GoldPatchPolicy(), RulePlannerPolicy()):
        summary = await rollout(
            tasks,
            policy,
            RolloutConfig(
                env={"scaffold": "graph-planner", "sandbox": {"type": "docker"}},
                output_dir=tmp_path / policy.name,
                progress=False,
            ),
        )
        assert summary.graded == len(tasks) and summary.infra_failed == 0, summary
        assert summary.leaked_sandboxes == []
        assert summary.resolved == (len(tasks) if policy.name == "gold" else 0)
    first = next(iter(ResultStore(tmp_path / "rules").load().values()))
    assert "file(s) re-parsed" in first.trajectory["steps"][0]["info"]["next_observation"]
