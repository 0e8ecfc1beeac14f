"""``run.executor=ray`` on a real two-node Ray cluster started on this machine.

The cluster is what a user starts: ``ray start --head`` and ``ray start --address`` with
one CPU each, so two one-CPU episodes at once must land on both nodes. Teardown stops
only this cluster's processes (found by its private temp dir), never other Ray users'.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import require

from patchgym_trainer.cli import main

pytestmark = require("ray", "ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ours(marker: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmd and int(proc.name) != os.getpid():
                pids.append(int(proc.name))
    return pids


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    ray_bin = str(Path(sys.executable).parent / "ray")
    temp = Path(tempfile.mkdtemp(prefix="pgray-", dir="/tmp"))  # short: socket paths
    port = _free_port()
    address = f"127.0.0.1:{port}"
    common = ["--num-cpus=1", "--object-store-memory=80000000", "--disable-usage-stats"]

    def agent_ports() -> list[str]:  # fixed ports: the raylet need not wait for port files
        names = ("metrics-export-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port")
        return [f"--{name}={_free_port()}" for name in names]

    env = {**os.environ, "RAY_TMPDIR": str(temp)}
    try:
        subprocess.run(
            [ray_bin, "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
             "--include-dashboard=false", f"--temp-dir={temp}", *common, *agent_ports()],
            check=True, capture_output=True, timeout=240, env=env,
        )  # fmt: skip
        subprocess.run(
            [ray_bin, "start", f"--address={address}", "--node-ip-address=127.0.0.1", *common,
             *agent_ports()],
            check=True, capture_output=True, timeout=240, env=env,
        )  # fmt: skip
        yield address
    except subprocess.CalledProcessError as exc:  # the cluster itself did not come up
        why = (exc.stderr or b"").decode(errors="replace").strip().splitlines()[-3:]
        if os.environ.get("PATCHGYM_REQUIRE_RAY") == "1":
            raise
        pytest.skip(f"a local two-node Ray cluster did not start: {' | '.join(why)}")
    finally:
        marker = str(temp)
        for pid in _ours(marker):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        time.sleep(2)
        for pid in _ours(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(temp, ignore_errors=True)


def run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as code:
        main(argv)
    return int(code.value.code or 0)


def test_rollout_on_two_nodes_then_resume(cluster: str, tmp_path: Path) -> None:
    argv = [
        "rollout",
        "rollout.policy=gold",
        "dataset.limit=4",
        "rollout.concurrency=2",
        "run.executor=ray",
        f"ray.address={cluster}",
        "ray.num_cpus_per_episode=1",
        "--out",
        str(tmp_path),
    ]
    assert run(argv) == 0
    lines = [json.loads(x) for x in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert len(lines) == 4 and all(r["resolved"] for r in lines)
    nodes = {r["executed_on"] for r in lines}
    assert len(nodes) == 2, nodes  # one CPU per node, two episodes at once: both nodes work
    assert all(r["sandbox_s"] > 0 for r in lines)
    # resumable as without Ray: a second run finds everything graded
    assert run(argv) == 0
    assert len((tmp_path / "trajectories.jsonl").read_text().splitlines()) == 4


def test_validate_on_two_nodes(cluster: str, tmp_path: Path) -> None:
    argv = [
        "validate",
        "dataset.limit=2",
        "run.executor=ray",
        f"ray.address={cluster}",
        "ray.num_cpus_per_episode=1",
        "validate.concurrency=2",
        "--out",
        str(tmp_path),
    ]
    assert run(argv) == 0
    rows = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(r["outcome"] == "ok" for r in rows)
    assert len({r["executed_on"] for r in rows}) == 2
