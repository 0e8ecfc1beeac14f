"""SIGTERM and SIGKILL of running commands, then ``patchgym sandboxes reap``: nothing is left.

The rollout subprocesses are ``patchgym validate`` (a task whose eval script sleeps) and a
plain script driving ``SWEEnv``. On SIGTERM they must close everything themselves; after
SIGKILL, ``patchgym sandboxes reap`` must remove what they left. "Nothing" means: no
sandbox listed, no working copy, no overlay mount, no process, no container.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from patchgym_envs import bundled_task

PATCHGYM = [sys.executable, "-m", "patchgym_trainer"]

SCRIPT = r"""
import json, sys
from patchgym_envs import SWEEnv, Task
config, task = json.loads(sys.argv[1]), Task.model_validate_json(sys.argv[2])
env = SWEEnv(task, sandbox=config, step_timeout_s=600)
env.reset()
env.step({"name": "execute_bash", "arguments": {"cmd": "sleep 600"}})
"""


def sleeping_task(image: str | None = None) -> dict[str, Any]:
    task = bundled_task("semverlib")
    fields: dict[str, Any] = {"eval_script": "sleep 600", "eval_timeout": 900}
    if image is not None:
        fields.update(image=image, template=None)
    return task.model_copy(update=fields).model_dump(mode="json")


def processes_with(token: str, cmdline: bytes = b"") -> list[int]:
    """Processes of sandbox ``token`` (by its environment) whose command line holds ``cmdline``.

    Read from the host's /proc, so it sees into an isolated sandbox's private /tmp and PID
    namespace alike: the test needs no marker file inside the sandbox.
    """
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if f"PATCHGYM_SANDBOX={token}".encode() not in (entry / "environ").read_bytes():
                    continue
                if cmdline in (entry / "cmdline").read_bytes().replace(b"\0", b" "):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def patchgym(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400"}
    return subprocess.run([*PATCHGYM, *args], capture_output=True, text=True, timeout=300, env=env)


def listed(overrides: list[str]) -> list[str]:
    out = patchgym("sandboxes", "list", *overrides)
    assert out.returncode == 0, out.stderr
    return [line.split("│")[1].strip() for line in out.stdout.splitlines() if "│ pg-" in line]


def wait_for(check: Callable[[], bool], what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


class Local:
    overrides: list[str]

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.overrides = ["sandbox=local", f"++sandbox.state_dir={state_dir}"]
        self.config = {"type": "local", "state_dir": str(state_dir)}

    def task(self) -> dict[str, Any]:
        return sleeping_task()

    def started(self) -> bool:
        """A command of one of our sandboxes is in its ``sleep 600``."""
        return any(processes_with(sid, b"sleep 600") for sid in self.ids())

    def ids(self) -> list[str]:
        return sorted(p.name for p in self.state_dir.glob("pg-*"))

    def assert_clean(self, ids: list[str]) -> None:
        mounts = Path("/proc/mounts").read_text()
        for sid in ids:
            assert sid not in mounts, f"overlay of {sid} still mounted"
            assert not (self.state_dir / sid).exists(), f"working copy of {sid} left"
            wait_for(lambda s=sid: not processes_with(s), f"processes of {sid} to end", 10)


def run_command(env: Local, tmp_path: Path, command: str = "validate") -> subprocess.Popen[str]:
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps(env.task()) + "\n")
    child = subprocess.Popen(
        [
            *PATCHGYM,
            command,
            "dataset=file",
            f"dataset.path={data}",
            "validate.patches=[gold]" if command == "validate" else "rollout.policy=gold",
            "--out",
            str(tmp_path / "out"),
            *env.overrides,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return child


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Local]:
    env = Local(tmp_path / "state")
    yield env
    if env.state_dir.exists():  # a failed test: reap what it left (mounts, processes)
        patchgym("sandboxes", "reap", "--all-mine", *env.overrides)


@pytest.mark.parametrize("command", ["validate", "rollout"])
def test_sigterm_of_a_run_closes_everything(local: Local, tmp_path: Path, command: str) -> None:
    child = run_command(local, tmp_path, command)
    try:
        wait_for(local.started, "the eval script to start")
        ids = local.ids()
        assert ids
        child.send_signal(signal.SIGTERM)
        out, _ = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == 143, out
    assert listed(local.overrides) == []
    local.assert_clean(ids)


@pytest.mark.parametrize("command", ["validate", "rollout"])
def test_sigkill_of_a_run_then_reap(local: Local, tmp_path: Path, command: str) -> None:
    child = run_command(local, tmp_path, command)
    try:
        wait_for(local.started, "the eval script to start")
    finally:
        child.kill()
        child.wait()
    ids = local.ids()
    assert listed(local.overrides) == ids
    dry = patchgym("sandboxes", "reap", "--all-mine", "--dry-run", *local.overrides)
    assert dry.returncode == 0 and all(i in dry.stdout for i in ids)
    assert listed(local.overrides) == ids
    reap = patchgym("sandboxes", "reap", "--all-mine", *local.overrides)
    assert reap.returncode == 0, reap.stderr
    assert listed(local.overrides) == []
    local.assert_clean(ids)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_sweenv_script_signals(local: Local, tmp_path: Path, sig: signal.Signals) -> None:
    task = bundled_task("semverlib").model_dump_json()
    child = subprocess.Popen([sys.executable, "-c", SCRIPT, json.dumps(local.config), task])
    try:
        wait_for(local.started, "the command to start")
        ids = local.ids()
        child.send_signal(sig)
        child.wait(timeout=120)
    finally:
        child.kill()
    if sig == signal.SIGTERM:
        assert child.returncode == 143
        assert listed(local.overrides) == []
    else:
        labels = listed(local.overrides)
        assert labels == ids
        run = patchgym("sandboxes", "list", *local.overrides).stdout
        assert f"-{child.pid}-" in run, "the default run id names the process"
        assert patchgym("sandboxes", "reap", "--all-mine", *local.overrides).returncode == 0
        assert listed(local.overrides) == []
    local.assert_clean(ids)


def docker_containers(run_id: str) -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=patchgym.run-id={run_id}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def docker_rows(pid: int) -> list[list[str]]:
    out = patchgym("sandboxes", "list", "sandbox=docker")
    assert out.returncode == 0, out.stderr
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in out.stdout.splitlines()]
    return [r for r in rows if len(r) > 1 and f"-{pid}-" in r[1]]  # id, run, ...


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_sweenv_script_signals_docker(tmp_path: Path, sig: signal.Signals) -> None:
    from patchgym_sandbox.testing.engines import engine_missing

    if (
        shutil.which("docker") is None
        or subprocess.run(
            ["docker", "image", "inspect", "local/bookworm-py"], capture_output=True, check=False
        ).returncode
    ):
        engine_missing("Docker engine not reachable or local/bookworm-py missing")
    task = bundled_task("semverlib").model_copy(
        update={"image": "local/bookworm-py", "template": None}
    )
    child = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, json.dumps({"type": "docker"}), task.model_dump_json()]
    )
    try:
        wait_for(lambda: bool(docker_rows(child.pid)), "the container to exist")
        time.sleep(3)  # the command is running
        run_id = docker_rows(child.pid)[0][1]
        assert docker_containers(run_id)
        child.send_signal(sig)
        child.wait(timeout=120)
    finally:
        child.kill()
    if sig == signal.SIGTERM:
        assert child.returncode == 143
    else:
        assert docker_containers(run_id)
        dry = patchgym("sandboxes", "reap", "--run", run_id, "--dry-run", "sandbox=docker")
        assert dry.returncode == 0 and docker_containers(run_id)
        out = patchgym("sandboxes", "reap", "--run", run_id, "sandbox=docker")
        assert out.returncode == 0, out.stderr
    assert docker_containers(run_id) == []
    assert docker_rows(child.pid) == []
