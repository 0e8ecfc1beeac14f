"""Every tool call has a deadline, and a debugger printing forever costs a bounded buffer.

``tool_timeout_s`` bounds a whole tool call: one that outlives it is abandoned as an error
observation and the episode goes on. A pdb command that prints without end comes back
interrupted with a bounded observation, and the session keeps working.
"""

from __future__ import annotations

from typing import Any

from patchgym_envs import SWEEnv, bundled_task
from patchgym_envs.tools import ToolSettings


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def test_default_deadline_leaves_room_for_a_few_commands() -> None:
    assert ToolSettings(step_timeout_s=10, tool_timeout_s=None).tool_deadline_s == 90
    assert ToolSettings(step_timeout_s=10, tool_timeout_s=5).tool_deadline_s == 5


def test_a_call_past_the_tool_deadline_is_abandoned(local_config: dict[str, Any]) -> None:
    env = SWEEnv(
        bundled_task("wordwrap"), sandbox=local_config, step_timeout_s=600, tool_timeout_s=3
    )
    env.reset()
    try:
        obs, _, done, info = env.step(call("execute_bash", cmd="sleep 600"))
        assert not done and info["error"], obs
        assert "did not finish within 3 s and was abandoned" in obs
        obs, _, done, _ = env.step(call("execute_bash", cmd="echo alive"))
        assert not done and "alive" in obs
    finally:
        env.close()


def test_pdb_printing_forever_is_bounded(local_config: dict[str, Any]) -> None:
    env = SWEEnv(
        bundled_task("wordwrap"),
        sandbox=local_config,
        scaffold="debug-gym",
        step_timeout_s=5,
        max_observation_chars=4000,
    )
    env.reset()
    try:
        obs, _, done, _ = env.step(call("pdb", command="b wordwrap/core.py:1"))
        assert not done, obs
        flood = "!import itertools; [print('pg-flood-line') for _ in itertools.count()]"
        obs, _, done, _ = env.step(call("pdb", command=flood))
        assert not done and len(obs) < 8000, obs[-300:]
        obs, _, done, _ = env.step(call("pdb", command="p 1 + 1"))
        assert not done and "2" in obs, obs
    finally:
        env.close()
