"""The same rollout without Ray, on a one-node Ray cluster and on a two-node one.

    UV_PROJECT_ENVIRONMENT=/tmp/venv-ray uv run --package patchgym-trainer --extra ray \\
        python bench/ray_rollout.py
    ... python bench/ray_rollout.py --episodes-per-task 4 --cpus 2

Each row runs ``patchgym rollout rollout.policy=gold`` over the bundled tasks with
``rollout.concurrency=<cpus>`` as its own process, as a user does: ``run.executor=local``
(the baseline), then ``run.executor=ray`` on a :class:`~patchgym_trainer.executors.ray_local.LocalRayCluster`
of one node with ``cpus`` CPUs, then of two nodes with ``cpus / 2`` each. The wall time is
the command's, so Ray's connect and task start-up count; starting the cluster does not.
On one machine a second node adds no cores: the two-node row measures what distribution
costs, not what it gains. Not a test: nothing here fails.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from patchgym_trainer.executors.ray_local import LocalRayCluster

console = Console(width=160)


def rollout(out: Path, args: argparse.Namespace, extra: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one ``patchgym rollout``; every episode must resolve."""
    argv = [sys.executable, "-m", "patchgym_trainer", "rollout", "rollout.policy=gold",
            f"rollout.samples={args.episodes_per_task}", f"rollout.concurrency={args.cpus}",
            *extra, "--out", str(out)]  # fmt: skip
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env={**env, "COLUMNS": "200"})
    wall = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return wall


def episodes(out: Path) -> tuple[int, int, int]:
    """(episodes, resolved, distinct nodes that ran them)."""
    rows = [json.loads(x) for x in (out / "trajectories.jsonl").read_text().splitlines()]
    nodes = {r.get("executed_on") for r in rows}
    return len(rows), sum(1 for r in rows if r["resolved"]), len(nodes)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes-per-task", type=int, default=2)
    parser.add_argument("--cpus", type=int, default=2, help="episodes at once (even)")
    args = parser.parse_args()
    table = Table(title="gold-policy rollout over the bundled tasks: executors")
    for col in ("executor", "episodes", "resolved", "nodes used", "wall s", "ep/min", "vs local"):
        table.add_column(col)
    cases: list[tuple[str, int]] = [("local", 0), ("ray, 1 node", 1), ("ray, 2 nodes", 2)]
    base_rate = 0.0
    with tempfile.TemporaryDirectory(prefix="pg-bench-ray-") as tmp:
        for name, nodes in cases:
            console.print(f"{name}…")
            out = Path(tmp) / name.replace(" ", "").replace(",", "-")
            if nodes == 0:
                wall = rollout(out, args, ["run.executor=local"], dict(os.environ))
            else:
                with LocalRayCluster(nodes=nodes, cpus_per_node=args.cpus // nodes) as cluster:
                    extra = ["run.executor=ray", f"ray.address={cluster.address}",
                             "ray.num_cpus_per_episode=1"]  # fmt: skip
                    wall = rollout(out, args, extra, cluster.env)
            n, resolved, used = episodes(out)
            rate = n / wall * 60
            base_rate = base_rate or rate
            table.add_row(name, str(n), str(resolved), str(used), f"{wall:.1f}", f"{rate:.1f}",
                          f"{rate / base_rate:.2f}×")  # fmt: skip
    console.print(table)


if __name__ == "__main__":
    main()
