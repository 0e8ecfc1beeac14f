"""The file viewers read at most what they show, whatever the file's size."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from patchgym_envs import SWEEnv, bundled_task

MB = 1024 * 1024


@pytest.mark.parametrize("scaffold", ["r2egym", "debug-gym"])
def test_view_of_a_huge_file_stays_small_in_the_driver(
    local_config: dict[str, Any], scaffold: str
) -> None:
    env = SWEEnv(bundled_task("romanum"), sandbox=local_config, scaffold=scaffold)
    env.reset()
    bash = "execute_bash" if scaffold == "r2egym" else "bash"
    key = "cmd" if scaffold == "r2egym" else "command"
    try:
        env.step({"name": bash, "arguments": {key: "yes 'line of text' | head -c 200M > big.txt"}})
        if scaffold == "r2egym":
            calls = [
                {"command": "view", "path": "/testbed/big.txt"},
                {
                    "command": "view",
                    "path": "/testbed/big.txt",
                    "view_range": [5_000_000, 5_000_003],
                },
                {
                    "command": "str_replace",
                    "path": "/testbed/big.txt",
                    "old_str": "x",
                    "new_str": "y",
                },
            ]
            name = "file_editor"
        else:
            calls = [{"path": "big.txt", "start": 5_000_000, "end": 5_000_003}, {"path": "big.txt"}]
            name = "view"
        tracemalloc.start()
        try:
            observations = [env.step({"name": name, "arguments": c})[0] for c in calls]
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 24 * MB, peak
        assert all(len(o) < 20_000 for o in observations)
        assert "5000000" in observations[0 if scaffold == "debug-gym" else 1]
        assert "line of text" in observations[1 if scaffold == "debug-gym" else 0]
        if scaffold == "r2egym":
            assert "pass view_range" in observations[0]
            assert "byte limit of the editing tools" in observations[2]
    finally:
        env.close()
