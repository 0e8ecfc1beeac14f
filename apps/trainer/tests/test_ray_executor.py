"""``run.executor=ray`` on a real two-node Ray cluster started on this machine.

The cluster is what a user starts: ``ray start --head`` and ``ray start --address`` with
one CPU each, so two one-CPU episodes at once must land on both nodes. Teardown stops
only this cluster's processes (found by its private temp dir), never other Ray users'.

Token authentication is explicit and private to the cluster: Ray 2.60's ``ray start
--head`` turns it on by itself when ``~/.ray/auth_token`` exists, but ``ray start
--address`` and a driver given an explicit address do not, so a stale token file left
on a machine split the cluster (``InvalidAuthToken``). Both nodes and the driver get
``RAY_AUTH_MODE=token`` and a token file in the cluster's temp dir instead.
"""

from __future__ import annotations

import json
import os
import secrets
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


def _warm_bytecode(python: str) -> None:
    """Compile Ray's package once, so that its agents start within the raylet's wait.

    The raylet waits a fixed 15 s (not configurable in Ray 2.60) for its dashboard agent
    to write a port file, then aborts. With ``PYTHONDONTWRITEBYTECODE=1`` (set here and in
    CI) every agent compiles Ray's modules from source on each start, which takes longer
    than that on a loaded 2-core machine. Compiled files are reused and only rewritten
    when a source changed, so later runs pay only the check.
    """
    import ray

    subprocess.run(
        [python, "-m", "compileall", "-q", "-j", "0", str(Path(ray.__file__).parent)],
        check=False, capture_output=True, timeout=600,
    )  # fmt: skip


def _stop(marker: str) -> None:
    """Stop every process whose command line names ``marker`` (one cluster's temp dir).

    Repeated until none is left: a raylet may still spawn an agent while being stopped.
    """
    for round_ in range(5):
        pids = _ours(marker)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM if round_ == 0 else signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(2)


def _start_cluster(ray_bin: str, temp: Path) -> str:
    """``ray start`` a head and a second node in ``temp``; returns the head's address."""
    port = _free_port()
    address = f"127.0.0.1:{port}"
    common = ["--num-cpus=1", "--object-store-memory=80000000", "--disable-usage-stats"]

    def agent_ports() -> list[str]:  # fixed ports: the raylet need not wait for these files
        names = (
            "metrics-export-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
            "runtime-env-agent-port",
        )  # fmt: skip
        return [f"--{name}={_free_port()}" for name in names]

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["RAY_TMPDIR"] = str(temp)
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
    return address


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    ray_bin = str(Path(sys.executable).parent / "ray")
    root = Path(tempfile.mkdtemp(prefix="pgray-", dir="/tmp"))  # short: socket paths
    token = root / "auth_token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    patch = pytest.MonkeyPatch()
    patch.delenv("RAY_AUTH_TOKEN", raising=False)  # would win over the token file
    patch.setenv("RAY_AUTH_MODE", "token")  # inherited by both `ray start`s and the driver
    patch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    why: list[str] = []
    try:
        _warm_bytecode(sys.executable)
        for attempt in range(1, 4):  # the agent's start races a fixed timeout under load
            try:
                address = _start_cluster(ray_bin, root / f"c{attempt}")
                break
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
                _stop(str(root))  # what the failed attempt left running
                why = (exc.stderr or b"").decode(errors="replace").strip().splitlines()[-3:]
        else:
            if os.environ.get("PATCHGYM_REQUIRE_RAY") == "1":
                raise RuntimeError(f"a local two-node Ray cluster did not start: {why}")
            pytest.skip(f"a local two-node Ray cluster did not start: {' | '.join(why)}")
        yield address
    finally:
        patch.undo()
        _stop(str(root))
        shutil.rmtree(root, ignore_errors=True)


def run(argv: list[str]) -> int:
    """``patchgym <argv>`` as its own process, as a user runs it.

    Not in this process: Ray reads its auth settings once per process, and an earlier test
    of the session may already have imported and initialised Ray without the cluster's token.
    """
    done = subprocess.run(
        [sys.executable, "-m", "patchgym_trainer", *argv],
        capture_output=True, text=True, timeout=900, env={**os.environ, "COLUMNS": "400"},
    )  # fmt: skip
    if done.returncode:
        print(done.stdout[-4000:], done.stderr[-4000:], sep="\n")
    return done.returncode


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
