"""A closed sandbox leaves no process behind, not even a zombie for someone else to reap; an
open one lives as long as the driver, not as long as the thread that started it."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchgym_sandbox import Sandbox, SandboxSpec, create_backend

DRIVER = """
import asyncio, ctypes, os, sys
from patchgym_sandbox import SandboxSpec, create_backend

# as a trainer that is its container's PID 1: every orphan of this process tree is ours
assert ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER

def zombies():
    me, found = str(os.getpid()), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                state, ppid = fh.read().rsplit(")", 1)[1].split()[:2]
        except OSError:
            continue
        if state == "Z" and ppid == me:
            found.append(pid + ":" + open(f"/proc/{pid}/comm").read().strip())
    return found

async def main():
    backend = create_backend({"type": "local", "state_dir": sys.argv[1], "isolation": sys.argv[2]})
    for _ in range(3):
        async with backend.sandbox(SandboxSpec()) as sb:
            await sb.exec("sleep 30 & true")
    await backend.aclose()
    print("ZOMBIES", zombies())

asyncio.run(main())
"""


ISOLATIONS = pytest.mark.parametrize(
    "isolation",
    [
        "bwrap",
        pytest.param(
            "gvisor",
            marks=pytest.mark.skipif(shutil.which("runsc") is None, reason="needs runsc"),
        ),
    ],
)


@ISOLATIONS
def test_a_closed_sandbox_leaves_no_zombie_to_a_pid_1_that_does_not_reap(
    tmp_path: Path, isolation: str
) -> None:
    """The driver is its own subreaper here, as a trainer that is its container's PID 1 is
    everything's: a process the sandbox's teardown orphaned would be its zombie for good.
    bwrap: its init, killed after bubblewrap, used to be one per sandbox; gvisor: runsc's
    own helpers (``exe``), about seven per sandbox, and four of the availability probe's,
    until runsc ran under a reaper of its own (``gvisor.REAPER``)."""
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(tmp_path / "state"), isolation],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ZOMBIES []" in done.stdout, (done.stdout, done.stderr[-2000:])


@ISOLATIONS
def test_a_sandbox_outlives_the_loop_and_the_thread_that_started_it(
    tmp_path: Path, isolation: str
) -> None:
    """A parent-death signal fires when the *thread* that forked the child ends, not the
    process: a sandbox started from a pool thread (a loop's default executor, shut down
    with ``asyncio.run``) must not die with that thread. gvisor's reaper once had one, and
    on cgroup v2 bubblewrap did, through the clone helper's parent thread."""
    backend = create_backend(
        {"type": "local", "state_dir": str(tmp_path / "state"), "isolation": isolation}
    )

    async def start() -> Sandbox:
        return await backend.sandbox(SandboxSpec()).start()

    sandbox = asyncio.run(start())  # its executor's threads are joined when this returns

    async def use() -> str:
        try:
            return (await sandbox.exec("echo alive")).stdout
        finally:
            await sandbox.close()
            await backend.aclose()

    assert asyncio.run(use()).strip() == "alive"
