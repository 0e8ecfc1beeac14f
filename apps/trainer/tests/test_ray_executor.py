"""``run.executor=ray`` on a real two-node Ray cluster started on this machine.

The cluster is what a user starts (:class:`patchgym_trainer.executors.ray_local.LocalRayCluster`:
``ray start --head`` and ``ray start --address``) with one CPU per node, so two one-CPU
episodes at once must land on both nodes. Teardown stops only this cluster's processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from conftest import require

if TYPE_CHECKING:
    from patchgym_trainer.executors.ray_local import LocalRayCluster

pytestmark = require("ray", "ray")


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRayCluster]:
    from patchgym_trainer.executors.ray_local import ClusterStartError, LocalRayCluster

    ray_cluster = LocalRayCluster(nodes=2, cpus_per_node=1)
    try:
        ray_cluster.start()
    except ClusterStartError as exc:
        ray_cluster.stop()
        if os.environ.get("PATCHGYM_REQUIRE_RAY") == "1":
            raise
        pytest.skip(str(exc))
    try:
        yield ray_cluster
    finally:
        ray_cluster.stop()


def run(argv: list[str], env: dict[str, str]) -> int:
    """``patchgym <argv>`` as its own process, as a user runs it.

    Not in this process: Ray reads its auth settings once per process, and an earlier test
    of the session may already have imported and initialised Ray without the cluster's token.
    """
    done = subprocess.run(
        [sys.executable, "-m", "patchgym_trainer", *argv],
        capture_output=True, text=True, timeout=900, env={**env, "COLUMNS": "400"},
    )  # fmt: skip
    if done.returncode:
        print(done.stdout[-4000:], done.stderr[-4000:], sep="\n")
    return done.returncode


def test_rollout_on_two_nodes_then_resume(cluster: LocalRayCluster, tmp_path: Path) -> None:
    argv = [
        "rollout",
        "rollout.policy=gold",
        "dataset.limit=4",
        "rollout.concurrency=2",
        "run.executor=ray",
        f"ray.address={cluster.address}",
        "ray.num_cpus_per_episode=1",
        "sandbox.max_starting=1",  # one admission actor for both nodes' workers
        "--out",
        str(tmp_path),
    ]
    assert run(argv, cluster.env) == 0
    lines = [json.loads(x) for x in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert len(lines) == 4 and all(r["resolved"] for r in lines)
    nodes = {r["executed_on"] for r in lines}
    assert len(nodes) == 2, nodes  # one CPU per node, two episodes at once: both nodes work
    assert all(r["sandbox_s"] > 0 for r in lines)
    # resumable as without Ray: a second run finds everything graded
    assert run(argv, cluster.env) == 0
    assert len((tmp_path / "trajectories.jsonl").read_text().splitlines()) == 4


def test_validate_on_two_nodes(cluster: LocalRayCluster, tmp_path: Path) -> None:
    argv = [
        "validate",
        "dataset.limit=2",
        "run.executor=ray",
        f"ray.address={cluster.address}",
        "ray.num_cpus_per_episode=1",
        "validate.concurrency=2",
        "--out",
        str(tmp_path),
    ]
    assert run(argv, cluster.env) == 0
    rows = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(r["outcome"] == "ok" for r in rows)
    assert len({r["executed_on"] for r in rows}) == 2
