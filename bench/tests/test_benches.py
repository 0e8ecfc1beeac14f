"""Every bench in bench/ runs end to end at a tiny size, so none of them can rot.

Not a measurement: the numbers printed at this size mean nothing and nothing is asserted
about them. A bench added without an entry in ``TINY`` fails here until it gets one.
Run by the ``benches`` nox session (one environment with every member and the peers the
benches compare against).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1]

TINY: dict[str, list[str]] = {
    "ags_standin.py": ["--n", "3", "--concurrent", "2"],
    "backends.py": [
        "--backend", "docker", "-n", "3", "--rounds", "1", "--lifecycle-n", "1", "--execs", "1",
        "--concurrency", "2", "--group", "2", "--group-rounds", "1", "--docker-modes", "server",
    ],
    "cli_startup.py": ["--rounds", "2"],
    "code_graph.py": ["--lines", "300", "--repeat", "1"],
    "exec_hops.py": ["--n", "3"],
    "grading.py": ["--size-mb", "1", "--repeat", "1", "--episodes", "1", "--backends", "local"],
    "localbuild.py": ["--n", "1", "--no-docker"],
    "ray_rollout.py": ["--episodes-per-task", "1", "--cpus", "2"],
    "rollout.py": [
        "--concurrency", "2", "--episodes", "2", "--eval-cpu", "0.05",
        *(["--by-program"] if os.geteuid() == 0 and shutil.which("perf") else []),
    ],
    "sandbox_exec.py": [
        "--n", "3", "--lifecycles", "1", "--copy-lifecycles", "1", "--files", "50", "--split-n", "8",
        *(["--host-mounts", "2"] if os.geteuid() == 0 else []),
    ],
    "train_step.py": [
        "--tasks", "1", "--samples", "2", "--turns", "1", "--max-new-tokens", "8", "--static-cache",
        "--static-runs", "2",
    ],
}  # fmt: skip
"""Each bench's arguments for the smallest run that still goes through all of its code."""


def benches() -> list[str]:
    """The bench scripts (a name starting with ``_`` is a module they share)."""
    return sorted(p.name for p in BENCH.glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("name", benches())
def test_bench_runs_at_tiny_size(name: str, tmp_path: Path) -> None:
    assert name in TINY, f"bench/{name} has no tiny arguments: add it to TINY in {__file__}"
    env = {**os.environ, "MSWEA_SILENT_STARTUP": "1", "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(BENCH / name), *TINY[name]],
        capture_output=True, text=True, timeout=900, env=env, cwd=BENCH.parent,
    )  # fmt: skip
    assert done.returncode == 0, (
        f"bench/{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
