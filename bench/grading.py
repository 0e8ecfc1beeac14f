"""Benchmark: grading cost. Two parts, each against a baseline measured in the same run.

``--what log``: grade a ~50 MB real pytest log with patchgym-rewards and with swebench
5.0.2. ``--what episode``: per-episode grading time through ``SWEEnv`` (gold patch on a
bundled task, the ``finish`` step timed), fresh grading sandbox vs the episode's own
sandbox, on the local backend and on docker, round-robin, ratio fresh/same::

    uv run python bench/grading.py --what episode [--episodes 8] [--backends local,docker]

Not a test: it prints numbers and never fails on them. The log is produced once by
actually running a generated pytest suite (``pytest -rA --tb=long``: captured output
for every passing test, long tracebacks for failures) and cached.

    UV_PROJECT_ENVIRONMENT=/tmp/venv-rewards uv run --package patchgym-rewards \
        --group bench python bench/grading.py [--size-mb 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from patchgym_rewards import grade_swebench
from patchgym_rewards.parsers import parse_pytest
from patchgym_rewards.text import normalize

START, END = ">>>>> Start Test Output", ">>>>> End Test Output"
LINES_PER_TEST = 200
BYTES_PER_TEST = 16_900  # captured output (-rA shows it for passing tests) + tracebacks


def make_log(size_mb: int, cache: Path) -> Path:
    """Run a generated suite big enough for ``size_mb`` of log; reuse a cached log.

    Few tests with much captured output each: pytest's ``-rA`` passes summary is
    quadratic in the number of tests, so tens of thousands of tiny tests take ages.
    """
    log = cache / f"pytest_{size_mb}mb.log"
    if log.exists():
        return log
    cache.mkdir(parents=True, exist_ok=True)
    n = size_mb * 1_000_000 // BYTES_PER_TEST
    (cache / "suite").mkdir(exist_ok=True)
    (cache / "suite" / "test_big.py").write_text(
        textwrap.dedent(
            f"""
            import pytest

            @pytest.mark.parametrize("case", [f"id{{i}}-p{{i % 7}}" for i in range({n})])
            def test_case(case):
                for line in range({LINES_PER_TEST}):
                    print(f"{{case}}: log line {{line}} " + "x" * 60)
                assert not case.startswith("id5"), "cases starting with 5 fail"
            """
        )
    )
    script = (
        f"set -x\n: '{START}'\n"
        "pytest -rA --tb=long -p no:cacheprovider test_big.py\n"
        "SWEBENCH_TEST_EXIT_CODE=$?\n"
        f": '{END}'\n"
        'echo ">>>>> Test Exit Code: $SWEBENCH_TEST_EXIT_CODE"\n'
    )
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    with log.open("wb") as out:
        subprocess.run(
            ["bash", "-c", script],
            cwd=cache / "suite",
            env=env,
            stdout=out,
            stderr=out,
            check=False,
        )
    return log


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def peak_mib(fn: Callable[[], Any]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def grading_step_s(sandbox: dict[str, Any], where: str, task_name: str) -> float:
    """One gold episode; seconds spent in the ``finish`` step (diff, grading, close)."""
    from patchgym_envs import SWEEnv, bundled_task

    task = bundled_task(task_name)
    env = SWEEnv(task, sandbox=sandbox, max_steps=4, grading={"sandbox": where})
    try:
        env.reset()
        gold = f"git apply - <<'PATCH_EOF'\n{task.gold_patch}PATCH_EOF"
        env.step({"name": "execute_bash", "arguments": {"cmd": gold}})
        start = time.perf_counter()
        _, reward, done, info = env.step({"name": "finish", "arguments": {}})
        elapsed = time.perf_counter() - start
        if not (done and reward == 1.0):
            raise RuntimeError(f"gold did not resolve on {sandbox['type']}/{where}: {info}")
        return elapsed
    finally:
        env.close()


def episode_bench(console: Console, backends: list[str], episodes: int, task_name: str) -> None:
    table = Table(title=f"per-episode grading time ({task_name}, gold, {episodes} episodes each)")
    for col in (
        "backend",
        "same p50 (s)",
        "fresh p50 (s)",
        "fresh / same",
        "extra per episode (s)",
    ):
        table.add_column(col, justify="right" if col != "backend" else "left")
    for name in backends:
        sandbox: dict[str, Any] = {"type": name}
        if name == "docker":
            from patchgym_envs.bundled.docker import build_image

            build_image(task_name)
        times: dict[str, list[float]] = {"same": [], "fresh": []}
        grading_step_s(sandbox, "fresh", task_name)  # warm-up (image, template caches)
        with console.status(f"timing {name}"):
            for _ in range(episodes):  # round-robin: load hits both alike
                for where in ("same", "fresh"):
                    times[where].append(grading_step_s(sandbox, where, task_name))
        same, fresh = statistics.median(times["same"]), statistics.median(times["fresh"])
        table.add_row(
            name,
            f"{same:.3f}",
            f"{fresh:.3f}",
            f"[bold]{fresh / same:.2f}x[/bold]",
            f"{fresh - same:+.3f}",
        )
    console.print(table)


def main() -> None:
    ap = argparse.ArgumentParser(description="grading cost: log grading and per-episode grading")
    ap.add_argument("--what", choices=("log", "episode", "all"), default="all")
    ap.add_argument("--size-mb", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "patchgym-bench")
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--backends", default="local,docker")
    ap.add_argument("--task", default="csvlite")
    args = ap.parse_args()
    console = Console(width=150)
    if args.what in ("episode", "all"):
        episode_bench(console, args.backends.split(","), args.episodes, args.task)
    if args.what == "episode":
        return

    with console.status("producing the log by running pytest (cached after the first run)"):
        log = make_log(args.size_mb, args.cache)
    size = log.stat().st_size
    with console.status("importing swebench.harness (slow, not timed)"):
        from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS, EvalType
        from swebench.harness.grading import (
            get_eval_tests_report,
            get_logs_eval,
            get_resolution_status,
        )
        from swebench.harness.log_parsers.python import parse_log_pytest
        from swebench.types import TestSpec

    text = log.read_text()
    spec = TestSpec("bench", "", [], "", "", [], [], "parse_log_pytest", "pass_and_fail")
    ids = list(parse_log_pytest(text, spec))
    rng = random.Random(0)
    passing = [i for i in ids if "[id5" not in i]
    f2p = rng.sample(passing, 20)
    p2p = rng.sample(passing, min(2000, len(passing)))
    spec.FAIL_TO_PASS, spec.PASS_TO_PASS = f2p, p2p
    gold: Any = {FAIL_TO_PASS: f2p, PASS_TO_PASS: p2p}

    def ours_grade() -> tuple[bool, str]:
        v = grade_swebench(log.read_bytes(), f2p, p2p)
        return v.resolved, v.status.value

    def theirs_grade() -> tuple[bool, str]:
        sm, found = get_logs_eval(spec, str(log))
        if not found:
            return False, "not found"
        report = get_eval_tests_report(sm, gold, eval_type=EvalType.PASS_AND_FAIL)
        status = get_resolution_status(report)
        return status == "RESOLVED_FULL", status

    rows: list[tuple[str, float, float, float, Any]] = []
    for label, ours, theirs in (
        (
            "parse only (str in memory)",
            lambda: parse_pytest(normalize(text)),
            lambda: parse_log_pytest(text, spec),
        ),
        ("full grade (file -> verdict)", ours_grade, theirs_grade),
    ):
        with console.status(f"timing {label}"):
            t_ours, r_ours = timed(ours, args.repeat)
            t_theirs, r_theirs = timed(theirs, args.repeat)
            m_ours, m_theirs = peak_mib(ours), peak_mib(theirs)
        if isinstance(r_ours, dict):
            same = {k: str(v) for k, v in r_ours.items()} == r_theirs
        else:
            same = r_ours == r_theirs
        rows.append(
            (
                label,
                t_ours,
                t_theirs,
                m_ours,
                (m_theirs, same, r_ours if not isinstance(r_ours, dict) else len(r_ours)),
            )
        )

    table = Table(
        title=f"grading a {size / 1e6:.1f} MB pytest -rA log ({len(ids)} test ids), best of {args.repeat}"
    )
    for col in (
        "what",
        "patchgym (s)",
        "swebench (s)",
        "speed-up",
        "peak MiB ours",
        "peak MiB swebench",
        "same result",
    ):
        table.add_column(col, justify="right" if col != "what" else "left")
    for label, t_ours, t_theirs, m_ours, (m_theirs, same, result) in rows:
        table.add_row(
            label,
            f"{t_ours:.3f}",
            f"{t_theirs:.3f}",
            f"[bold]{t_theirs / t_ours:.1f}x[/bold]",
            f"{m_ours:.0f}",
            f"{m_theirs:.0f}",
            f"{'yes' if same else '[red]NO[/red]'} ({result})",
        )
    console.print(table)


if __name__ == "__main__":
    main()
