"""The security section of the conformance suite against the local backend, default settings."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from patchgym_sandbox import Sandbox, SandboxSpec
from patchgym_sandbox.testing.security import SandboxSecurity


class TestLocalSecurity(SandboxSecurity):
    """No setting but the state dir: the defaults are the boundary."""

    @pytest.fixture
    def backend_config(self, tmp_path: Path) -> dict[str, Any]:
        return {"type": "local", "state_dir": str(tmp_path / "state")}

    @pytest.fixture
    def sandbox_spec(self, template_repo: Path) -> SandboxSpec:
        return SandboxSpec(template=str(template_repo), workdir="/testbed")

    @pytest.mark.asyncio
    async def test_signal_init(self, sb: Sandbox) -> None:
        """Every signal root inside can send to PID 1, the init that is also the exec
        server: the kernel drops those whose action is the default (a namespace's init,
        signalled from inside), so the init must handle none (Python's SIGINT handler
        would raise KeyboardInterrupt in it and end the sandbox)."""
        self.attack("signal_init")
        signals = (
            "HUP INT QUIT USR1 USR2 PIPE ALRM TERM CHLD CONT TSTP TTIN TTOU WINCH URG STOP KILL"
        )
        await sb.exec(f"for s in {signals}; do kill -s $s 1; done; true", timeout=30)
        r = await sb.exec("echo still-here", timeout=60)
        assert r.stdout == "still-here\n", "a signal from inside ended the sandbox's init"


GVISOR_OOM = (
    "the write goes through but aims nothing: gVisor's /proc/<pid>/oom_score_adj is a value "
    "the Sentry stores and no OOM killer reads (the Sentry kills no task for memory, "
    "google/gvisor#1967); this machine's OOM killer sees only runsc's processes, whose /proc "
    "files nothing inside can reach"
)


@pytest.mark.skipif(shutil.which("runsc") is None, reason="isolation: gvisor needs runsc")
class TestLocalGvisorSecurity(TestLocalSecurity):
    """``isolation: gvisor``: the same attacks against the sandbox under runsc."""

    specials_reach_driver = False  # FIFOs and sockets live in the Sentry, not on the host
    proc_cgroup_lists_groups = False  # the Sentry's /proc/self/cgroup is empty
    pids_limit = 512  # the pids cgroup also holds runsc's own threads (~100): 64 cannot start
    cannot_prevent: ClassVar[Mapping[str, str]] = {
        "kill_driver": "gVisor (runsc 20221219) delivers SIGKILL sent from inside to the "
        "sandbox's PID 1 (Linux drops it), so `kill -9 1` ends the sandbox; the host and "
        "the driver are untouched, and the policy's own failure is scored 0 (blame)",
        "exceed_memory": "the memory limit holds, but the Sentry is one host process: the "
        "OOM killer ends the whole sandbox rather than the one command over the limit",
        "exceed_process_count": "the pids limit holds for this machine, but the pids cgroup "
        "counts runsc's host threads and ptrace stubs, not the sandbox's tasks: reaching it "
        "ends the whole sandbox (the Sentry cannot start a thread), not one fork",
        "signal_init": "gVisor (runsc 20221219) delivers signals sent from inside to the "
        "sandbox's PID 1 that Linux drops (SIGKILL at least, see kill_driver), so this "
        "ends the sandbox; the host and the driver are untouched (blame scores it 0)",
        "raise_init_oom_score": GVISOR_OOM,
        "raise_exec_server_oom_score": GVISOR_OOM,
    }

    @pytest.fixture
    def backend_config(self, tmp_path: Path) -> dict[str, Any]:
        return {"type": "local", "state_dir": str(tmp_path / "state"), "isolation": "gvisor"}
