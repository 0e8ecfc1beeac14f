"""Rollout throughput: the gold policy over the bundled tasks on the local backend.

    uv run python bench/rollout.py                      # concurrency 1, 8, 32, 64
    uv run python bench/rollout.py --concurrency 8 --episodes 24
    uv run python bench/rollout.py --concurrency 8 64 --rounds 2   # a busy, shared host
    uv run python bench/rollout.py --grading same   # grade in the episode's own sandbox
    uv run python bench/rollout.py --concurrency 8 --by-program   # CPU by program (perf, root)
    uv run python bench/rollout.py --concurrency 8 --eval-cpu 2   # tests 2 CPU s longer

For each concurrency c, in the same run (``--rounds`` times each, alternated floor, ours,
ours, floor, ...; totals over the rounds):

- ours: ``patchgym_agents.rollout`` with ``GoldPatchPolicy`` (sandbox per episode, the
  gold patch through the r2egym tools, grading with hidden tests, close), samples of a
  task made as one group; graded in a fresh sandbox (the default) or, with ``--grading
  same``, in the episode's own (one sandbox per episode: what the second one costs);
- floor: the least any harness can do for the same verdicts: ``cp -a`` the task's
  template, ``git apply`` the gold and test patches (or copy its hidden test files) and
  run its eval script with the task's env and the episodes' interpreter first on PATH
  (as the local backend's sandbox spec sets it), c at once; as root, in a cpu cgroup
  beside the sandboxes' under their parent, so a busy host's scheduler weighs both
  sides alike (the sandboxes' parent weighs one process per CPU against the rest).

Reported: episodes per minute of each, ours / floor, and the event-loop lag (how late a
10 ms ``asyncio.sleep`` wakes, p50 / p99) while ours runs, and where ours' episode time goes
(mean seconds per phase, from the trajectories' phase times; ``grading_create`` /
``grading_close`` are the fresh grading sandbox's), beside each side's CPU seconds per
episode (the whole machine's busy time around the side's runs, ``/proc/stat``: on a quiet
machine, what the side and everything it started used; on a full one, throughput follows
it), ours' CPU per episode beyond the floor's (the harness's cost on a full machine) and the
floor CPU per episode (the tests' run, mostly) from which that cost is under 10% (``9 ×``
it: on tasks whose tests run longer, ours is past 90% of the floor), and the driver
process's own user and system CPU per episode: its Python runs one
thread at a time, so 60 s / its user CPU per episode bounds ours' episodes per minute on any
number of cores (``driver-bound ep/min``; the system time, mounts and cgroups in its
threads, runs in parallel). Run it with bytecode compiled
(``uv sync --locked --compile-bytecode``): without it both sides compile pytest on every
test run and the harness's own cost is hidden (it warns). Targets: ≥ 90% of the floor at
c = 8 and c = 64, loop lag p99 < 50 ms at c = 64. With ``--by-program`` (``perf``, root),
each side's CPU per episode by program too (:mod:`_program_cpu`): what the harness costs
beyond the floor, program by program. Not a test: nothing here fails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import resource
import shlex
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _program_cpu import LEGEND, ProgramCpu, unavailable
from rich.console import Console
from rich.table import Table

from patchgym_agents import GoldPatchPolicy, RolloutConfig, rollout
from patchgym_envs import EnvConfig, Task, bundled_tasks
from patchgym_envs.bundled import resolve_template
from patchgym_envs.sandboxes import local_path
from patchgym_sandbox.local import cgroup_layout, cgroups

console = Console(width=200)


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples) or [0.0]
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class LoopLag:
    """Samples how late a ``sleep(interval)`` wakes on the running loop."""

    def __init__(self, interval: float = 0.01) -> None:
        self.interval = interval
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(self.interval)
            self.lags.append(max(0.0, time.perf_counter() - t0 - self.interval))

    def __enter__(self) -> LoopLag:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *_: object) -> None:
        if self._task is not None:
            self._task.cancel()


async def ours(
    tasks: list[Task], c: int, episodes: int, work: Path, run_dir: Path, grading: str
) -> tuple[float, int, LoopLag]:
    """``grading``: the episodes' ``grading.sandbox`` (``--grading``)."""
    samples = math.ceil(episodes / len(tasks))
    cfg = RolloutConfig(
        env=EnvConfig(
            sandbox={"type": "local", "state_dir": str(work / "state")},
            grading={"sandbox": grading},
        ),
        samples=samples,
        concurrency=c,
        output_dir=run_dir,
        progress=False,
        resume=False,
        infra_retries=0,
    )
    with LoopLag() as lag:
        t0 = time.perf_counter()
        summary = await rollout(tasks, GoldPatchPolicy(), cfg)
        wall = time.perf_counter() - t0
    assert summary.resolved == summary.episodes, summary
    return wall, summary.episodes, lag


PHASE_ORDER = (
    "admission", "create", "setup", "generation", "tool", "close",
    "grading_create", "grading", "grading_close",
)  # fmt: skip
"""Phase columns in an episode's order; ``grading`` is the grading work itself (taking the
patch, staging and running the tests), without the fresh sandbox's create and close."""


def overhead_cells(floor_cpu: float, ours_cpu: float) -> tuple[str, str]:
    """The harness's CPU per episode beyond the floor's, and the floor CPU per episode
    (mostly the tests' run) from which, CPU-bound, ours reaches 90% of the floor:
    ``floor / (floor + overhead) >= 0.9`` holds from ``floor >= 9 × overhead``."""
    extra = ours_cpu - floor_cpu
    return f"{extra * 1000:.0f}", f"{9 * extra:.2f}" if extra > 0 else "-"


def phase_means(run_dirs: list[Path]) -> dict[str, float]:
    """Mean seconds per environment phase over the episodes of some runs, from their
    trajectories, in :data:`PHASE_ORDER` (any other phase after)."""
    rows = [
        json.loads(x)
        for run_dir in run_dirs
        for x in (run_dir / "trajectories.jsonl").read_text().splitlines()
    ]
    found = {k for r in rows for k in r.get("phases") or {}}
    names = [n for n in PHASE_ORDER if n in found] + sorted(found - set(PHASE_ORDER))
    return {n: sum((r.get("phases") or {}).get(n, 0.0) for r in rows) / len(rows) for n in names}


def machine_cpu_s() -> float:
    """Seconds of CPU this machine has been busy (every process, from ``/proc/stat``): a
    side's share is the difference around its run, on an otherwise quiet machine."""
    with open("/proc/stat") as fh:
        ticks = [int(x) for x in fh.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait (then irq, softirq; steal is not ours)
    return (sum(ticks[:7]) - idle) / os.sysconf("SC_CLK_TCK")


def missing_bytecode() -> bool:
    """The interpreter both sides run the tests with has no bytecode for pytest: with the
    tasks' ``PYTHONDONTWRITEBYTECODE=1`` every test run then compiles pytest again."""
    import importlib.util

    import pytest

    return not Path(importlib.util.cache_from_source(pytest.__file__)).is_file()


PHASES_FIXED = (
    "concurrency",
    "floor wall × c / episodes",
    "ours wall × c / episodes",
    "floor CPU s/ep",
    "ours CPU s/ep",
    "driver user / sys ms/ep",
    "driver-bound ep/min",
    "ours − floor CPU ms/ep",
    "90% from floor CPU s/ep ≥",
)
"""The phases table's columns before the phases themselves (added as the runs report them)."""
BURN = (
    "python3 -I -S -c 'import time\nt = time.process_time()\n"
    "while time.process_time() - t < {s}:\n    for _ in range(20000): pass'\n"
)
"""``--eval-cpu``: the line put before each task's eval script (both sides): ``s`` CPU
seconds of a busy loop in user space (the clock read every ~0.5 ms), a longer test run
at no other cost."""


def heavier(tasks: list[Task], seconds: float) -> list[Task]:
    """``tasks`` whose eval scripts first burn ``seconds`` of CPU (unchanged at 0)."""
    if seconds <= 0:
        return tasks
    burn = BURN.format(s=seconds)
    return [t.model_copy(update={"eval_script": burn + t.eval_script}) for t in tasks]


def floor_group() -> tuple[Path | None, str]:
    """Where the floor's commands run: a group beside the sandboxes' own, under the same
    parent, so that on a busy host the scheduler weighs both sides alike (the sandboxes'
    parent counts as one default process per CPU against the rest of the machine, see
    ``patchgym_sandbox.local.cgroup_layout``). The file the floor writes ``0`` to (itself)."""
    parent = cgroups.parent_for("cpu")
    if parent is None or os.geteuid() != 0:
        return None, "no writable cpu cgroup here: the floor runs at the machine's default weight"
    group = parent / "bench-rollout-floor"
    v2 = cgroups.layout().version == "v2"
    try:
        group.mkdir(parents=True, exist_ok=True)
        if not v2:
            cgroup_layout.share_cpu(parent / "cpu.shares", cgroup_layout.V1_SHARES_PER_CPU, 262_144)
    except OSError as exc:
        return None, f"cannot make {group} ({exc}): the floor runs at the machine's default weight"
    member = group / ("cgroup.procs" if v2 else "tasks")
    return member, f"the floor runs in {group}, beside the sandboxes' groups under one parent"


async def floor(tasks: list[Task], c: int, episodes: int, work: Path) -> tuple[float, int]:
    samples = math.ceil(episodes / len(tasks))
    sem = asyncio.Semaphore(c)
    patches = work / "patches"
    patches.mkdir(exist_ok=True)
    for task in tasks:
        (patches / f"{task.id}.gold").write_text(task.gold_patch)
        (patches / f"{task.id}.test").write_text(task.test_patch)
        for rel, text in task.hidden_files.items():  # R2E-style hidden tests
            path = patches / f"{task.id}.hidden" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)

    group, _ = floor_group()  # made again each time: a sandbox sweep may remove it when empty
    enter = f"echo 0 > {shlex.quote(str(group))} && " if group is not None else ""

    def episode(task: Task, k: int) -> None:
        assert task.template is not None
        dest = work / f"floor-c{c}-{task.id}-{k}"
        script = (
            enter
            + f"cp -a {shlex.quote(str(resolve_template(task.template)))} {dest} && cd {dest} && "
            f"git apply {patches / (task.id + '.gold')} && "
            + (f"git apply {patches / (task.id + '.test')} && " if task.test_patch.strip() else "")
            + (f"cp -a {patches / (task.id + '.hidden')}/. . && " if task.hidden_files else "")
            + f"{{ {task.eval_script}\n}}; rc=$?; cd / && rm -rf {dest}; exit $rc"
        )
        # the task's own settings and interpreter, as an episode's sandbox spec applies them
        env = {**os.environ, "PATH": local_path(), **task.env}
        res = subprocess.run(["bash", "-c", script], capture_output=True, timeout=900, env=env)
        assert res.returncode == 0, (task.id, res.stdout[-500:], res.stderr[-500:])

    pool = ThreadPoolExecutor(max_workers=c)  # to_thread's default pool would cap c at 6 here

    async def one(task: Task, k: int) -> None:
        async with sem:
            await asyncio.get_running_loop().run_in_executor(pool, episode, task, k)

    t0 = time.perf_counter()
    try:
        await asyncio.gather(*(one(t, k) for t in tasks for k in range(samples)))
    finally:
        pool.shutdown()
        if group is not None:
            with contextlib.suppress(OSError):
                group.parent.rmdir()
    return time.perf_counter() - t0, samples * len(tasks)


async def round_for(
    c: int,
    episodes: int,
    tasks: list[Task],
    work: Path,
    phases: Table,
    rounds: int,
    grading: str,
    programs: ProgramCpu | None = None,
) -> list[str]:
    """``rounds`` runs of each side at concurrency ``c``, in the order floor, ours, ours,
    floor, ... (a load that drifts during the rounds weighs on both sides alike);
    ``programs``: each side's CPU by program is sampled too (``--by-program``)."""
    f_wall = o_wall = f_cpu = o_cpu = o_user = o_sys = 0.0
    f_n = o_n = 0
    lags: list[float] = []
    run_dirs: list[Path] = []
    for k in range(rounds):
        for side in ("floor", "ours") if k % 2 == 0 else ("ours", "floor"):
            sampled = programs.sample(side) if programs else contextlib.nullcontext()
            busy = machine_cpu_s()
            if side == "floor":
                with sampled:
                    wall, n = await floor(tasks, c, episodes, work)
                f_wall, f_n, f_cpu = f_wall + wall, f_n + n, f_cpu + machine_cpu_s() - busy
            else:
                run_dirs.append(work / f"run-c{c}-{k}")
                before = resource.getrusage(resource.RUSAGE_SELF)
                with sampled:
                    wall, n, lag = await ours(tasks, c, episodes, work, run_dirs[-1], grading)
                after = resource.getrusage(resource.RUSAGE_SELF)
                o_wall, o_n, o_cpu = o_wall + wall, o_n + n, o_cpu + machine_cpu_s() - busy
                o_user += after.ru_utime - before.ru_utime
                o_sys += after.ru_stime - before.ru_stime
                lags += lag.lags
            if programs:
                programs.episodes[side] += n
    means = phase_means(run_dirs)
    for name in means:
        if name not in [col.header for col in phases.columns]:
            phases.add_column(name)
    phases.add_row(
        str(c),
        f"{f_wall * c / f_n:.2f}",
        f"{o_wall * c / o_n:.2f}",
        f"{f_cpu / f_n:.3f}",
        f"{o_cpu / o_n:.3f}",
        f"{o_user / o_n * 1000:.1f} / {o_sys / o_n * 1000:.1f}",
        f"{60 * o_n / o_user:.0f}" if o_user else "-",
        *overhead_cells(f_cpu / f_n, o_cpu / o_n),
        *(f"{means.get(str(col.header), 0):.3f}" for col in phases.columns[len(PHASES_FIXED) :]),
    )
    f_rate, o_rate = f_n / f_wall * 60, o_n / o_wall * 60
    return [
        str(c),
        str(o_n),
        f"{o_rate:.1f}",
        f"{f_rate:.1f}",
        f"{o_rate / f_rate:.0%}",
        f"{pct(lags, 0.5) * 1000:.1f} / {pct(lags, 0.99) * 1000:.1f} ms",
    ]


async def main_async(args: argparse.Namespace) -> None:
    tasks = heavier(bundled_tasks(), args.eval_cpu)
    table = Table(
        title=f"gold-policy rollouts on local, {len(tasks)} bundled tasks, "
        f"grading.sandbox: {args.grading}"
        + (f", eval scripts + {args.eval_cpu:g} CPU s" if args.eval_cpu > 0 else "")
    )
    for col in (
        "concurrency",
        "episodes",
        "ours ep/min",
        "floor ep/min",
        "ours/floor",
        "loop lag p50 / p99",
    ):
        table.add_column(col)
    phases = Table(title="ours: where an episode's time goes (mean s per episode)")
    for col in PHASES_FIXED:
        phases.add_column(col)
    console.print(
        "floor: per episode `cp -a` of the task's template, `git apply` gold (and test patch, "
        "or copy the hidden tests), then its eval script under `bash -c` with the task's own "
        "env (task.env) and the episodes' python first on PATH, c episodes at once in "
        "threads; no sandbox, no tools, no grading parse; " + floor_group()[1]
    )
    if missing_bytecode():
        console.print(
            "[yellow]warning: this interpreter's site-packages has no bytecode; both sides "
            "then compile pytest on every test run (PYTHONDONTWRITEBYTECODE=1), which hides "
            "the harness's own cost: run `uv sync --locked --compile-bytecode` first[/]"
        )
    why_not = unavailable() if args.by_program else None
    if why_not:
        console.print(f"[yellow]--by-program: {why_not}; sampling nothing[/]")
    by_program: list[Table] = []
    with tempfile.TemporaryDirectory(prefix="pg-bench-rollout-") as tmp:
        for c in args.concurrency:
            episodes = args.episodes or max(len(tasks), c)
            console.print(f"concurrency {c}: {episodes} episodes…")
            programs = ProgramCpu() if args.by_program and not why_not else None
            table.add_row(
                *await round_for(
                    c, episodes, tasks, Path(tmp), phases, args.rounds, args.grading, programs
                )
            )
            if programs:
                by_program.append(programs.table(f"CPU by program, concurrency {c} (perf)"))
    console.print(table)
    console.print(phases)
    for t in by_program:
        console.print(t)
    if by_program:
        console.print("programs: " + "; ".join(f"{k}: {v}" for k, v in LEGEND.items()))
    console.print("targets: ours/floor ≥ 90% at c=8 and c=64; loop lag p99 < 50 ms at c=64")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--episodes", type=int, default=None, help="default: max(one per task, c)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="runs of each side per concurrency, alternated floor/ours/ours/floor (a busy, "
        "shared host: 2 or more)",
    )
    parser.add_argument(
        "--grading",
        choices=["fresh", "same"],
        default="fresh",
        help="where ours grades: fresh (the default: a second sandbox with only the agent's "
        "diff) or same (the episode's sandbox, one per episode: it trusts what the policy "
        "left there, see packages/envs-swe/README.md)",
    )
    parser.add_argument(
        "--by-program",
        action="store_true",
        help="also sample each side's CPU by program with perf (root): ms per episode of "
        "the driver, the exec servers, git, bash, bwrap, the test runs, ...",
    )
    parser.add_argument(
        "--eval-cpu",
        type=float,
        default=0.0,
        metavar="S",
        help="put S CPU seconds of a busy loop before each task's eval script, on both "
        "sides: a task whose tests run longer (the harness's cost per episode stays)",
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
