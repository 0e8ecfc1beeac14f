"""Behavioural tests shared by every backend.

Subclass :class:`SandboxConformance` in a backend's test module and provide two fixtures:
``backend_config`` (a JSON-serialisable mapping; the SIGKILL test also builds the backend
from it in a subprocess) and ``sandbox_spec`` (an image or template with bash, python3 and
coreutils, and a writable workdir). A backend is done when this suite is green against its
real engine. Class attributes let a backend scale the heavy tests to its machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from patchgym_sandbox import labels as L
from patchgym_sandbox.backend import SandboxBackend
from patchgym_sandbox.errors import PathOutsideSandbox, SandboxClosed, SandboxFileNotFound
from patchgym_sandbox.sandbox import Sandbox
from patchgym_sandbox.session import ShellSession
from patchgym_sandbox.spec import SandboxSpec
from patchgym_sandbox.testing.fork_conformance import ForkConformance
from patchgym_sandbox.testing.pool_conformance import PoolConformance
from patchgym_sandbox.testing.suite import BackendSuite

ALIVE_CHECK = (
    # Exit 0 iff the pid in the file is a live process: not a zombie (PID 1 may not reap
    # here) nor dead (X), the states kill_tree counts as gone
    "p=$(cat {f}); [ -r /proc/$p/stat ] || exit 1; read -r s < /proc/$p/stat; s=${{s##*) }}; "
    's=${{s%% *}}; [ "$s" != Z ] && [ "$s" != X ]'
)

IGNORES_INT_AND_QUIT = (
    "python3 -c 'import signal,sys; signal.signal(2,signal.SIG_IGN); "
    "signal.signal(3,signal.SIG_IGN); sys.stdin.read()'",
    "trap '' INT QUIT; cat",
)
"""Stdin readers that Ctrl-C and Ctrl-\\ cannot end (the second leaves the shell's own
traps set, so every later job ignores both too, as a hostile policy may do every step)."""


async def _survives_jobs_ignoring_signals(sh: ShellSession) -> None:
    """Each job times out (the backend kills its process group) and the shell lives on."""
    for cmd in ("cat", *IGNORES_INT_AND_QUIT, "sleep 300"):
        r = await sh.run(cmd, timeout=1)
        assert r.timed_out and r.exit_code != 0, (cmd, r)
        assert (await sh.run("echo alive $((6*7))")).output.strip() == "alive 42", cmd


class SandboxConformance(BackendSuite, PoolConformance, ForkConformance):
    run_id: ClassVar[str] = "conformance"
    concurrency: ClassVar[int] = 50
    """Sandboxes created and used at once in the concurrency test."""
    reap_sandboxes: ClassVar[int] = 3
    """Sandboxes the SIGKILLed driver leaves behind."""
    driver_ready_timeout: ClassVar[float] = 180.0

    # -- exec ----------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_exit_codes(self, sb: Sandbox) -> None:
        assert (await sb.exec("true")).exit_code == 0
        r = await sb.exec("exit 3")
        assert r.exit_code == 3 and not r.ok and not r.timed_out
        assert (await sb.exec("no-such-command-xyz")).exit_code == 127
        assert (await sb.exec(["printf", "%s|", "a b", "c"])).stdout == "a b|c|"

    @pytest.mark.asyncio
    async def test_streams_and_interleaving(self, sb: Sandbox) -> None:
        r = await sb.exec("echo a; sleep 0.3; echo b >&2; sleep 0.3; echo c")
        assert r.stdout == "a\nc\n"
        assert r.stderr == "b\n"
        assert r.output == "a\nb\nc\n"

    @pytest.mark.asyncio
    async def test_stdin_cwd_env(self, sb: Sandbox) -> None:
        assert (await sb.exec("cat", stdin="hello\n")).stdout == "hello\n"
        await sb.exec("mkdir -p sub/dir")
        r = await sb.exec("pwd", cwd="sub/dir")
        assert r.stdout.strip() == f"{sb.workdir.rstrip('/')}/sub/dir"
        assert (await sb.exec("echo $FOO", env={"FOO": "bar baz"})).stdout == "bar baz\n"
        assert (await sb.exec("pwd")).stdout.strip() == sb.workdir

    @pytest.mark.asyncio
    async def test_commands_have_a_shell(self, sb: Sandbox) -> None:
        # the supervisor sets SHELL (to the bash it runs) where the sandbox's environment has
        # none: bash reads the user database for it otherwise, at every start
        r = await sb.exec('[ -x "$SHELL" ] && echo runnable')
        assert r.stdout == "runnable\n", r
        r = await sb.exec('echo "$SHELL"', env={"SHELL": "/bin/mine"})
        assert r.stdout == "/bin/mine\n", r

    @pytest.mark.asyncio
    async def test_timeout_kills_process_tree(self, sb: Sandbox) -> None:
        cmd = "sleep 300 & echo $! > bg.pid; setsid sleep 300 & echo $! > sid.pid; sleep 300"
        t0 = time.monotonic()
        r = await sb.exec(cmd, timeout=1.5)
        assert r.timed_out and not r.ok and r.exit_code == 124
        assert time.monotonic() - t0 < 60
        for f in ("bg.pid", "sid.pid"):
            alive = await sb.exec(ALIVE_CHECK.format(f=f))
            assert alive.exit_code != 0, f"process from {f} survived the timeout"

    @pytest.mark.asyncio
    async def test_background_children_do_not_outlive_exec(self, sb: Sandbox) -> None:
        r = await sb.exec("sleep 300 > /dev/null 2>&1 & echo $! > bg2.pid; echo done", timeout=30)
        assert r.exit_code == 0 and r.stdout == "done\n" and r.duration_s < 20
        assert (await sb.exec(ALIVE_CHECK.format(f="bg2.pid"))).exit_code != 0

    @pytest.mark.asyncio
    async def test_idle_timeout(self, sb: Sandbox) -> None:
        r = await sb.exec("echo start; sleep 300", idle_timeout=1.0, timeout=120)
        assert r.idle_timed_out and not r.timed_out
        assert "start" in r.output
        busy = await sb.exec("for i in 1 2 3 4; do echo $i; sleep 0.4; done", idle_timeout=1.5)
        assert busy.ok and busy.stdout.split() == ["1", "2", "3", "4"]

    @pytest.mark.asyncio
    async def test_output_is_capped_head_and_tail(self, sb: Sandbox) -> None:
        cap = sb.spec.max_output_bytes
        r = await sb.exec(f"printf START; head -c {cap * 4} /dev/zero | tr '\\0' x; printf END")
        assert r.exit_code == 0 and r.truncated
        assert r.bytes_dropped > cap
        assert r.output.startswith("START") and r.output.endswith("END")
        assert len(r.output) < cap * 1.2

    @pytest.mark.asyncio
    async def test_non_utf8_output(self, sb: Sandbox) -> None:
        r = await sb.exec(r"printf 'ok \377\376 done'")
        assert r.exit_code == 0
        assert r.stdout.startswith("ok ") and r.stdout.endswith(" done")
        assert "\ufffd" in r.stdout

    # -- files -----------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_file_round_trip(self, sb: Sandbox) -> None:
        blob = bytes(range(256)) * 1024
        await sb.write_file("data/blob.bin", blob)
        assert await sb.read_file("data/blob.bin") == blob
        await sb.write_file("data/t.txt", "héllo\n")
        assert await sb.read_text("data/t.txt") == "héllo\n"
        assert (await sb.exec("cat data/t.txt")).stdout == "héllo\n"
        assert await sb.read_file(f"{sb.workdir}/data/t.txt") == "héllo\n".encode()
        with pytest.raises(SandboxFileNotFound):
            await sb.read_file("data/missing.txt")

    @pytest.mark.asyncio
    async def test_tar_upload_download(self, sb: Sandbox, tmp_path: Path) -> None:
        src = tmp_path / "src"
        (src / "a" / "b").mkdir(parents=True)
        (src / "a" / "b" / "x.bin").write_bytes(os.urandom(70_000))
        (src / "top.txt").write_text("top\n")
        await sb.upload(src, "up")
        r = await sb.exec("cat up/top.txt; wc -c < up/a/b/x.bin")
        assert r.stdout.split() == ["top", "70000"]
        dest = tmp_path / "back"
        await sb.download("up", dest)
        assert (dest / "top.txt").read_text() == "top\n"
        assert (dest / "a" / "b" / "x.bin").read_bytes() == (src / "a" / "b" / "x.bin").read_bytes()
        one = tmp_path / "one.txt"
        await sb.download("up/top.txt", one)
        assert one.read_text() == "top\n"

    @pytest.mark.asyncio
    async def test_path_escape_refused(self, sb: Sandbox) -> None:
        with pytest.raises(PathOutsideSandbox):
            await sb.read_file("../../../../etc/passwd")
        with pytest.raises(PathOutsideSandbox):
            await sb.write_file("sub/../../escape.txt", "x")
        with pytest.raises(PathOutsideSandbox):
            await sb.exec("true", cwd="../..")

    # -- sessions ----------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_session_state_persists(self, sb: Sandbox) -> None:
        await sb.exec("mkdir -p deep/er")
        async with sb.session() as sh:
            assert (await sh.run("cd deep/er && export V=42")).exit_code == 0
            r = await sh.run("pwd; echo $V")
            assert r.output.split() == [f"{sb.workdir.rstrip('/')}/deep/er", "42"]
            assert (await sh.run("false")).exit_code == 1
            assert (await sh.run("cat", timeout=1)).timed_out  # a stdin reader is interrupted
            slow = await sh.run("sleep 300", timeout=1)
            assert slow.timed_out and slow.exit_code != 0
            assert (await sh.run("echo $V; pwd")).output.split()[0] == "42"

    @pytest.mark.asyncio
    async def test_session_kills_jobs_ignoring_int_and_quit(self, sb: Sandbox) -> None:
        async with sb.session() as sh:
            await _survives_jobs_ignoring_signals(sh)

    @pytest.mark.asyncio
    async def test_session_under_inherited_ignored_signals(
        self, backend: SandboxBackend, sandbox_spec: SandboxSpec
    ) -> None:
        """The driver runs with SIGINT and SIGQUIT ignored, as under ``nohup ... &``: what it
        starts inherits that (a local shell, the stand-in's processes), so Ctrl-C ends nothing."""
        saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGQUIT)}
        try:
            async with backend.sandbox(sandbox_spec, run_id=self.run_id) as s:
                async with s.session() as sh:
                    await _survives_jobs_ignoring_signals(sh)
        finally:
            for sig, handler in saved.items():
                signal.signal(sig, handler)

    @pytest.mark.asyncio
    async def test_session_pdb_round_trip(self, sb: Sandbox) -> None:
        await sb.write_file("prog.py", "def f(n):\n    x = n * 7\n    return x\n\nprint(f(6))\n")
        async with sb.session() as sh:
            await sh.send("python3 -m pdb prog.py\n")
            assert not (await sh.expect(r"\(Pdb\) ", timeout=30)).timed_out
            await sh.send("b 3\n")
            assert "Breakpoint 1" in (await sh.expect(r"\(Pdb\) ", timeout=30)).output
            await sh.send("c\n")
            await sh.expect(r"\(Pdb\) ", timeout=30)
            await sh.send("p x\n")
            assert "42" in (await sh.expect(r"\(Pdb\) ", timeout=30)).output
            await sh.send("q\n")
            after = await sh.run("echo back", timeout=30)
            assert after.output.strip().endswith("back")

    # -- lifecycle -------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_lazy_start_and_idempotent_close(
        self, backend: SandboxBackend, sandbox_spec: SandboxSpec
    ) -> None:
        run_id = f"lazy-{uuid.uuid4().hex[:8]}"
        s = backend.sandbox(sandbox_spec, run_id=run_id)
        assert not s.started
        assert not await backend.list_sandboxes({L.RUN_ID: run_id})
        s.spec.env["LAZY"] = "set-before-start"
        assert (await s.exec("echo $LAZY")).stdout == "set-before-start\n"
        listed = await backend.list_sandboxes({L.RUN_ID: run_id})
        assert [i.labels.get(L.SANDBOX_ID) for i in listed] == [s.id]
        await s.close()
        await s.close()
        with pytest.raises(SandboxClosed):
            await s.exec("true")
        assert not await backend.list_sandboxes({L.RUN_ID: run_id})
        never = backend.sandbox(sandbox_spec)
        await never.close()  # closing a never-started sandbox creates nothing

    @pytest.mark.asyncio
    async def test_concurrency(self, backend: SandboxBackend, sandbox_spec: SandboxSpec) -> None:
        run_id = f"conc-{uuid.uuid4().hex[:8]}"

        async def one(i: int) -> str:
            async with backend.sandbox(sandbox_spec, run_id=run_id) as s:
                await s.write_file("i.txt", str(i))
                return (await s.exec("cat i.txt; echo")).stdout.strip()

        got = await asyncio.gather(*(one(i) for i in range(self.concurrency)))
        assert got == [str(i) for i in range(self.concurrency)]
        assert not await backend.list_sandboxes({L.RUN_ID: run_id})

    @pytest.mark.asyncio
    async def test_reap_expired_lease(
        self, backend: SandboxBackend, sandbox_spec: SandboxSpec
    ) -> None:
        run_id = f"lease-{uuid.uuid4().hex[:8]}"
        s = backend.sandbox(sandbox_spec, run_id=run_id, lease_s=1)
        await s.start()
        await asyncio.sleep(2.1)
        assert await backend.reap(expired=True)
        assert not await backend.list_sandboxes({L.RUN_ID: run_id})
        await s.close()  # closing after an outside removal is not an error

    @pytest.mark.asyncio
    async def test_reap_after_sigkilled_driver(
        self, backend: SandboxBackend, backend_config: Mapping[str, Any], sandbox_spec: SandboxSpec
    ) -> None:
        run_id = f"killed-{uuid.uuid4().hex[:8]}"
        args = {
            "config": dict(backend_config),
            "spec": sandbox_spec.model_dump(mode="json"),
            "run_id": run_id,
            "n": self.reap_sandboxes,
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "patchgym_sandbox.testing.driver", json.dumps(args)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            line = await asyncio.wait_for(
                asyncio.to_thread(proc.stdout.readline),  # type: ignore[union-attr]  # spawned with stdout=PIPE
                self.driver_ready_timeout,
            )
            assert line.startswith("READY"), f"driver failed: {line!r}"
            assert len(await backend.list_sandboxes({L.RUN_ID: run_id})) == self.reap_sandboxes
        finally:
            proc.kill()
            proc.wait()
        await backend.reap({L.RUN_ID: run_id}, expired=False)
        assert not await backend.list_sandboxes({L.RUN_ID: run_id})
