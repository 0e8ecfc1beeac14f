"""A Ray cluster of ``nodes`` nodes on this machine, to try ``run.executor=ray`` locally.

What a user starts by hand (``ray start --head``, then ``ray start --address`` per extra
node), private to one temp dir: stopping it stops only its own processes (found by that
dir on their command lines), never other Ray users' on the machine. The tests of the Ray
executor and ``bench/ray_rollout.py`` use it.

Token authentication is explicit and private to the cluster: Ray 2.60's ``ray start
--head`` turns it on by itself when ``~/.ray/auth_token`` exists, but ``ray start
--address`` and a driver given an explicit address do not, so a stale token file on a
machine splits the cluster (``InvalidAuthToken``). Nodes and drivers get
``RAY_AUTH_MODE=token`` and a token file in the cluster's temp dir instead
(:attr:`LocalRayCluster.env`: pass it to the driver's process).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

START_ATTEMPTS = 3
"""The raylet waits a fixed 15 s for its dashboard agent (ray-project/ray#65983); under
load a start can miss that, so a failed start is cleaned up and tried again."""


class ClusterStartError(RuntimeError):
    """The local cluster did not start (the last ``ray start``'s error lines attached)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def processes_naming(marker: str) -> list[int]:
    """PIDs (not this one) whose command line holds ``marker``."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if marker.encode() in (proc / "cmdline").read_bytes():
                    pids.append(int(proc.name))
            except OSError:
                continue
    return pids


def stop_processes(marker: str) -> None:
    """Stop every process naming ``marker``, until none is left (a raylet may still spawn
    an agent while it is being stopped)."""
    for round_ in range(5):
        pids = processes_naming(marker)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM if round_ == 0 else signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(2)


def warm_bytecode(python: str = sys.executable) -> None:
    """Compile Ray's package once, so its agents start within the raylet's fixed wait.

    With ``PYTHONDONTWRITEBYTECODE=1`` every agent would compile Ray from source on each
    start, which takes longer than 15 s on a loaded 2-core machine. Compiled files are
    reused and only rewritten when a source changed.
    """
    import ray

    subprocess.run(
        [python, "-m", "compileall", "-q", "-j", "0", str(Path(ray.__file__).parent)],
        check=False, capture_output=True, timeout=600,
    )  # fmt: skip


class LocalRayCluster:
    """``with LocalRayCluster(nodes=2) as cluster:`` → ``cluster.address``, ``cluster.env``."""

    def __init__(self, nodes: int = 2, cpus_per_node: int = 1) -> None:
        if nodes < 1 or cpus_per_node < 1:
            raise ValueError(f"nodes and cpus_per_node must be >= 1, got {nodes}, {cpus_per_node}")
        self.nodes = nodes
        self.cpus_per_node = cpus_per_node
        self.root = Path(tempfile.mkdtemp(prefix="pgray-", dir="/tmp"))  # short: socket paths
        token = self.root / "auth_token"
        token.write_text(secrets.token_hex(32))
        token.chmod(0o600)
        env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_TOKEN"}
        self.env = {
            **env,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(token),
            "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",  # see patchgym_trainer.executors.ray.NO_UV_HOOK
        }
        """The environment for a driver (and the nodes) of this cluster."""
        self.address = ""
        self._ray = str(Path(sys.executable).parent / "ray")

    def start(self) -> str:
        warm_bytecode()
        why: list[str] = []
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                self.address = self._start(self.root / f"c{attempt}")
                return self.address
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
                stop_processes(str(self.root))  # what the failed attempt left running
                why = (exc.stderr or b"").decode(errors="replace").strip().splitlines()[-3:]
        raise ClusterStartError(f"a local {self.nodes}-node Ray cluster did not start: {why}")

    def _start(self, temp: Path) -> str:
        port = _free_port()
        address = f"127.0.0.1:{port}"
        common = [f"--num-cpus={self.cpus_per_node}", "--object-store-memory=80000000",
                  "--disable-usage-stats", "--node-ip-address=127.0.0.1"]  # fmt: skip
        env = {k: v for k, v in self.env.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["RAY_TMPDIR"] = str(temp)
        head = ["--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}"]
        for node in range(self.nodes):
            where = head if node == 0 else [f"--address={address}"]
            subprocess.run(
                [self._ray, "start", *where, *common, *self._agent_ports()],
                check=True, capture_output=True, timeout=240, env=env,
            )  # fmt: skip
        return address

    @staticmethod
    def _agent_ports() -> list[str]:
        """Fixed agent ports: the raylet need not wait for their port files."""
        names = ("metrics-export-port", "dashboard-agent-listen-port",
                 "dashboard-agent-grpc-port", "runtime-env-agent-port")  # fmt: skip
        return [f"--{name}={_free_port()}" for name in names]

    def stop(self) -> None:
        stop_processes(str(self.root))
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalRayCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
