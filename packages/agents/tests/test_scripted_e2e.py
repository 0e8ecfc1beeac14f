"""ScriptedPolicy on the local backend: a malformed step is explained, counted and recovered from."""

from __future__ import annotations

import asyncio

from patchgym_agents import ScriptedPolicy, Trajectory, run_episode
from patchgym_agents.envs_api import bundled_task
from patchgym_sandbox import SandboxBackend

FIX = (
    "Adding the missing subtractive pair.\n"
    "<function=file_editor>\n<parameter=command>str_replace</parameter>\n"
    "<parameter=path>/testbed/romanum/convert.py</parameter>\n"
    '<parameter=old_str>    (1000, "M"),\n</parameter>\n'
    '<parameter=new_str>    (1000, "M"),\n    (900, "CM"),\n</parameter>\n</function>'
)
SCRIPT = [
    "I think the table is missing 900. Let me fix it.",  # no call at all
    "<function=file_editor>\n<parameter=command>view\n<parameter=path>/testbed/romanum/convert.py</parameter>\n</function>",
    "<think>view it properly</think>\n<function=file_editor>\n<parameter=command>view</parameter>\n"
    "<parameter=path>/testbed/romanum/convert.py</parameter>\n</function>",
    FIX,
    "<function=finish>\n<parameter=command>submit</parameter>\n</function>",
]


async def test_malformed_steps_recover_and_resolve(backend: SandboxBackend) -> None:
    res = await run_episode(bundled_task("romanum"), ScriptedPolicy(SCRIPT), backend=backend)
    assert res.status == "graded" and res.resolved, res
    assert res.format_errors == 2 and res.model_steps == 5 and res.steps == 5
    steps = Trajectory.from_rllm(res.trajectory).steps
    assert steps[0].next_observation is not None
    assert steps[0].next_observation.startswith("ERROR: no tool call found in your reply")
    assert steps[1].next_observation is not None
    assert "parameter 'command' of file_editor is not closed" in steps[1].next_observation
    assert steps[2].next_observation is not None and "(900" not in steps[2].next_observation
    assert "cat -n" in steps[2].next_observation
    assert steps[3].info["format_error"] is None
    assert res.trajectory["info"]["format_error_rate"] == 2 / 5
    assert res.patch is not None and '(900, "CM")' in res.patch


async def test_exhausted_script_is_a_policy_error_not_a_crash(backend: SandboxBackend) -> None:
    res = await run_episode(bundled_task("romanum"), ScriptedPolicy([FIX]), backend=backend)
    assert res.status == "error" and res.error is not None and "exhausted" in res.error
    assert res.resolved is None


class SlowAfterFirstTurn(ScriptedPolicy):
    """Edits, then stalls past the episode budget."""

    async def generate(self, messages, *, tools, episode):  # type: ignore[override]
        if episode.state.get("turn") == 1:
            await asyncio.sleep(30)
        return await super().generate(messages, tools=tools, episode=episode)


async def test_episode_budget_ends_and_grades_what_is_there(backend: SandboxBackend) -> None:
    res = await run_episode(
        bundled_task("romanum"),
        SlowAfterFirstTurn([FIX, "<function=finish></function>"]),
        backend=backend,
        env={"episode_timeout_s": 4.0},
    )
    assert res.status == "graded" and res.done_reason == "timeout", res
    assert res.resolved is True  # the edit made before the budget ran out is graded
    assert res.steps == 1 and res.timings.total_s < 20


async def test_saved_trajectory_replays_to_the_same_outcome(backend: SandboxBackend) -> None:
    first = await run_episode(bundled_task("romanum"), ScriptedPolicy(SCRIPT), backend=backend)
    replay = ScriptedPolicy.from_trajectory(Trajectory.from_rllm(first.trajectory))
    second = await run_episode(bundled_task("romanum"), replay, backend=backend)
    assert (second.status, second.resolved, second.format_errors) == ("graded", True, 2)
    assert second.patch == first.patch


async def test_step_timeout_kills_a_hanging_command(backend: SandboxBackend) -> None:
    script = [
        "<function=execute_bash><parameter=cmd>sleep 60</parameter></function>",
        "<function=finish><parameter=command>submit</parameter></function>",
    ]
    res = await run_episode(
        bundled_task("romanum"),
        ScriptedPolicy(script),
        backend=backend,
        env={"step_timeout_s": 2},
    )
    assert res.status == "graded" and res.resolved is False
    obs = Trajectory.from_rllm(res.trajectory).steps[0].next_observation or ""
    assert "timed out after 2 s" in obs
    assert res.timings.total_s < 30


async def test_max_steps_ends_and_grades(backend: SandboxBackend) -> None:
    script = [FIX, *["<function=execute_bash><parameter=cmd>ls</parameter></function>"] * 5]
    res = await run_episode(
        bundled_task("romanum"), ScriptedPolicy(script), backend=backend, env={"max_steps": 3}
    )
    assert res.status == "graded" and res.done_reason == "max_steps" and res.resolved is True
    assert res.steps == 3
