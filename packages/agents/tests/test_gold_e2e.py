"""End to end on the local backend: the gold patch through each scaffold's own tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchgym_agents import GoldPatchPolicy, RolloutConfig, ScriptedPolicy, rollout, run_episode
from patchgym_agents.envs_api import bundled_task, bundled_tasks, scaffold_names
from patchgym_agents.policies.diffs import parse_diff
from patchgym_sandbox import SandboxBackend

EDIT_TOOLS = {
    "r2egym": "file_editor",
    "sweagent": "str_replace_editor",
    "debug-gym": "edit",
    "graph-planner": "repair",
}


@pytest.mark.parametrize("scaffold", scaffold_names())
async def test_gold_resolves_every_bundled_task(
    scaffold: str, backend: SandboxBackend, tmp_path: Path
) -> None:
    tasks = bundled_tasks()
    assert len(tasks) >= 6
    summary = await rollout(
        tasks,
        GoldPatchPolicy(),
        RolloutConfig(
            env={"scaffold": scaffold}, concurrency=3, output_dir=tmp_path, progress=False
        ),
        backend=backend,
    )
    assert summary.graded == summary.resolved == len(tasks), summary
    assert summary.format_errors == 0 and summary.infra_failed == 0
    assert summary.leaked_sandboxes == []
    from patchgym_agents.rollout import ResultStore

    for res in ResultStore(tmp_path).load().values():
        names = [s["action"]["name"] for s in res.trajectory["steps"]]
        assert names[0] == EDIT_TOOLS[scaffold], names  # edits went through the editor
        assert res.patch and res.verdict and res.verdict["resolved"]


@pytest.mark.parametrize("scaffold", scaffold_names())
async def test_gold_apply_mode_and_empty_patch(scaffold: str, backend: SandboxBackend) -> None:
    task = bundled_task("ledger")
    applied = await run_episode(
        task, GoldPatchPolicy(mode="apply"), env={"scaffold": scaffold}, backend=backend
    )
    assert applied.status == "graded" and applied.resolved, applied.trajectory["steps"]
    assert "git apply" in str(applied.trajectory["steps"])
    empty = await run_episode(
        task, GoldPatchPolicy(empty=True), env={"scaffold": scaffold}, backend=backend
    )
    assert empty.status == "graded" and empty.resolved is False
    assert empty.steps == 1


async def test_gold_falls_back_to_git_apply_when_an_edit_fails(backend: SandboxBackend) -> None:
    task = bundled_task("intervals")
    # make the hunk's old text appear twice (inside a string), so str_replace refuses it
    block = parse_diff(task.gold_patch)[0].hunks[0].old_text
    assert '"""' not in block
    dup = ScriptedPolicy(
        [
            "<function=execute_bash><parameter=cmd>cat >> intervals/ops.py <<'EOF'\n"
            f'_DUP = """\n{block}"""\nEOF</parameter></function>'
        ]
    )
    policy = GoldPatchPolicy()

    class DupThenGold(GoldPatchPolicy):
        async def generate(self, messages, *, tools, episode):  # type: ignore[override]
            if "dup" not in episode.state:
                episode.state["dup"] = True
                return await dup.generate(messages, tools=tools, episode=episode)
            return await policy.generate(messages, tools=tools, episode=episode)

    res = await run_episode(task, DupThenGold(), env={"scaffold": "r2egym"}, backend=backend)
    observations = [s["info"]["next_observation"] for s in res.trajectory["steps"]]
    assert any("appears" in o and "times" in o for o in observations), observations
    assert "git apply" in str(res.trajectory["steps"])
    assert res.status == "graded" and res.resolved, res
    assert res.patch is not None and "_DUP" not in res.patch  # the revert removed it
