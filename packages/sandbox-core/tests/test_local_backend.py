"""What only the local backend promises: CoW working copies, isolation, limits, the facade."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from patchgym_sandbox import (
    ConfigError,
    IsolationUnavailable,
    LimitUnavailable,
    SandboxSpec,
    SyncBackend,
    create_backend,
    load_config,
)
from patchgym_sandbox import labels as L
from patchgym_sandbox.local.backend import LocalSandbox
from patchgym_sandbox.testing.security import host_processes_with
from patchgym_sandbox.testing.waits import eventually


@pytest.fixture
def template(tmp_path: Path) -> Path:
    root = tmp_path / "tpl"
    root.mkdir()
    (root / "f.txt").write_text("original\n")
    return root


async def test_working_copy_never_touches_the_template(tmp_path: Path, template: Path) -> None:
    for mode in ("auto", "copy"):
        backend = create_backend(
            {"type": "local", "state_dir": str(tmp_path / mode), "copy_mode": mode}
        )
        async with backend.sandbox(SandboxSpec(template=str(template))) as sb:
            await sb.exec("echo changed > f.txt; rm -f f.txt; touch new.txt")
            assert (await sb.exec("ls")).stdout == "new.txt\n"
        assert (template / "f.txt").read_text() == "original\n"
        assert not (template / "new.txt").exists()
        assert not list((tmp_path / mode).glob("pg-*"))


async def test_file_api_refuses_host_paths(tmp_path: Path, template: Path) -> None:
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    async with backend.sandbox(SandboxSpec(template=str(template))) as sb:
        with pytest.raises(PermissionError):
            await sb.read_file("/etc/passwd")


async def test_missing_template_is_a_config_error(tmp_path: Path) -> None:
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    with pytest.raises(ConfigError, match="not a directory"):
        await backend.sandbox(SandboxSpec(template=str(tmp_path / "nope"))).start()
    assert not list((tmp_path / "s").glob("pg-*"))


async def test_isolation_hides_the_host_and_the_network(tmp_path: Path, template: Path) -> None:
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s"), "isolation": True})
    async with backend.sandbox(SandboxSpec(template=str(template), workdir="/testbed")) as sb:
        assert isinstance(sb, LocalSandbox) and sb.workdir == "/testbed"
        assert (await sb.exec("pwd")).stdout == "/testbed\n"
        assert (await sb.exec("touch /etc/pg-should-fail")).exit_code != 0
        assert (await sb.exec("touch /testbed/ok /tmp/ok")).exit_code == 0
        assert (await sb.exec("cat /proc/1/comm")).stdout.strip().startswith("python")  # server
        assert not (await sb.exec(f"test -e /proc/{os.getpid()}/environ")).ok  # driver unseen
        net = await sb.exec(
            "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 22), 1)'"
        )
        assert net.exit_code != 0
        assert await sb.read_file("/testbed/f.txt") == b"original\n"
    assert (sb.host_root / "ok").exists() is False  # removed with the sandbox


@pytest.mark.parametrize(
    ("module", "finder", "isolation", "fix"),
    [
        ("isolation", "bwrap_path", True, "apt-get install bubblewrap"),
        ("gvisor", "runsc_path", "gvisor", "apt-get install runsc"),
    ],
)
async def test_isolation_unavailable_is_reported(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    module: str,
    finder: str,
    isolation: object,
    fix: str,
) -> None:
    """A missing runtime (bwrap for the default mode, runsc for gvisor) is named with its fix."""
    found = getattr(importlib.import_module(f"patchgym_sandbox.local.{module}"), finder)
    found.cache_clear()
    monkeypatch.setattr(shutil, "which", lambda _: None)
    try:
        with pytest.raises(IsolationUnavailable, match=fix):
            create_backend({"type": "local", "state_dir": str(tmp_path), "isolation": isolation})
    finally:
        found.cache_clear()


@pytest.mark.parametrize(
    ("module", "finder", "isolation"),
    [("isolation", "bwrap_path", True), ("gvisor", "runsc_path", "gvisor")],
)
async def test_a_runtime_beneath_tmp_is_refused_by_name_for_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, finder: str, isolation: object
) -> None:
    """Run as root, the runtime starts where /tmp is the staging tmpfs: one found beneath
    /tmp (seen on a GPU node with bwrap unpacked there: every create failed with ENOENT for
    a file that exists) is refused at the backend's creation, naming the path and the fix."""
    if os.geteuid() != 0:
        pytest.skip("only root stages a sandbox's paths on /tmp")
    found = getattr(importlib.import_module(f"patchgym_sandbox.local.{module}"), finder)
    runtime = tmp_path / "bin" / "runtime"
    runtime.parent.mkdir()
    runtime.write_text("#!/bin/sh\nexit 0\n")
    runtime.chmod(0o755)
    found.cache_clear()
    monkeypatch.setattr(shutil, "which", lambda _: str(runtime))
    try:
        with pytest.raises(IsolationUnavailable, match=r"lives beneath /tmp.*outside /tmp"):
            create_backend({"type": "local", "state_dir": str(tmp_path), "isolation": isolation})
    finally:
        found.cache_clear()


async def test_gvisor_refuses_network(tmp_path: Path, template: Path) -> None:
    """No network under gVisor: asking for one is a config error naming the field."""
    if shutil.which("runsc") is None:
        pytest.skip("isolation: gvisor needs runsc")
    backend = create_backend(
        {"type": "local", "state_dir": str(tmp_path / "s"), "isolation": "gvisor"}
    )
    with pytest.raises(ConfigError, match="network"):
        async with backend.sandbox(SandboxSpec(template=str(template), network=True)):
            pass
    assert not [p for p in (tmp_path / "s").iterdir() if p.name.startswith("pg-")]
    await backend.aclose()


async def test_memory_limit_holds_for_root(tmp_path: Path) -> None:
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    spec = SandboxSpec(resources={"memory_mb": 200})  # type: ignore[arg-type]
    async with backend.sandbox(spec) as sb:
        r = await sb.exec(
            "python3 -c 'x = bytearray(600 * 1024 * 1024); x[::4096] = b\"1\" * len(x[::4096])'"
        )
        assert r.exit_code != 0
        assert (await sb.exec("python3 -c 'x = bytearray(20 * 1024 * 1024)'")).ok


async def test_unisolated_memory_limit_is_an_rlimit(tmp_path: Path) -> None:
    backend = create_backend(
        {"type": "local", "state_dir": str(tmp_path / "s"), "isolation": "none"}
    )
    spec = SandboxSpec(resources={"memory_mb": 200})  # type: ignore[arg-type]
    async with backend.sandbox(spec) as sb:
        r = await sb.exec("python3 -c 'x = bytearray(600 * 1024 * 1024)'")
        assert r.exit_code != 0 and "MemoryError" in r.stderr


async def test_isolation_none_warns_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from patchgym_sandbox.local import backend as local_backend

    local_backend._warned_unisolated = False
    with caplog.at_level(logging.WARNING, "patchgym.sandbox.local"):
        for _ in range(2):
            create_backend({"type": "local", "state_dir": str(tmp_path), "isolation": "none"})
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "NO SECURITY BOUNDARY" in caplog.records[0].message
    assert load_config({"type": "local"}).isolation == "bwrap"  # type: ignore[attr-defined]


async def test_unenforceable_limit_fails_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from patchgym_sandbox.local import cgroups

    monkeypatch.setattr(cgroups, "layout", lambda: cgroups.Layout("none"))
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    spec = SandboxSpec(resources={"pids": 10})  # type: ignore[arg-type]
    with pytest.raises(LimitUnavailable, match="pids"):
        await backend.sandbox(spec).start()
    assert not list((tmp_path / "s").glob("pg-*"))


async def test_sandboxes_share_one_cpu_group_apart_from_the_driver(
    tmp_path: Path, template: Path
) -> None:
    """Without a CPU limit too, a sandbox's processes sit in ``cpu:.../patchgym/<id>``: the
    scheduler weighs all sandboxes as one entity against the driver, whose event loop
    would otherwise wait behind every busy sandbox (loop lag under 64 rollouts)."""
    from patchgym_sandbox.local import cgroups

    parent = cgroups.parent_for("cpu")
    if parent is None:
        pytest.skip("no writable cpu controller here")
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    async with backend.sandbox(SandboxSpec(template=str(template))) as sb:
        assert isinstance(sb, LocalSandbox)
        cpu = [d for d in sb.cgroup_dirs if d.is_relative_to(parent)]
        assert cpu, sb.cgroup_dirs
        running = asyncio.create_task(sb.exec("sleep 60"))
        # the init and the command
        assert await eventually(lambda: len(cgroups.pids(cpu)) >= 2), cgroups.pids(cpu)
        inside = cgroups.pids(cpu)
        assert os.getpid() not in inside  # the driver stays outside
        running.cancel()
    assert not any(d.exists() for d in cpu)


async def test_reap_sweeps_orphan_empty_cgroups(tmp_path: Path) -> None:
    """A removal that gave up on a busy group (zombies under load) leaves an empty group
    behind: reap removes it once it is old, and never a young one (a start in flight)."""
    from patchgym_sandbox.local import cgroups

    parent = cgroups.parent_for("pids")
    if parent is None:
        pytest.skip("no writable pids controller here")
    old, young = (parent / f"pg-orphan{uuid.uuid4().hex[:8]}" for _ in range(2))
    for d in (old, young):
        d.mkdir(parents=True)
    os.utime(old, (1, 1))
    try:
        await create_backend({"type": "local", "state_dir": str(tmp_path / "s")}).reap()
        assert not old.exists()
        assert young.exists()
    finally:
        for d in (old, young):
            if d.exists():
                d.rmdir()


async def test_background_processes_live_between_execs_and_die_at_close(
    tmp_path: Path, template: Path
) -> None:
    marker = "pgbg" + uuid.uuid4().hex[:10]
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    async with backend.sandbox(SandboxSpec(template=str(template))) as sb:
        async with sb.session() as sh:
            await sh.run(f"(exec -a {marker} sleep 300) > /dev/null 2>&1 &")
        r = await sb.exec(f"cat /proc/[0-9]*/cmdline | tr '\\0' ' ' | grep -c {marker}")
        assert r.stdout.strip() != "0"  # the session's job is visible to a later exec
        assert host_processes_with(marker)
    assert not host_processes_with(marker)


async def test_the_init_reaps_what_commands_leave_behind(tmp_path: Path, template: Path) -> None:
    """Orphans become the init's children: a leftover the supervisor killed, and a detached
    process that exits later on its own (the reaper waits on the exit, no poll) are reaped,
    not left as zombies that count against the pids limit."""
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    async with backend.sandbox(SandboxSpec(template=str(template))) as sb:
        killed = (await sb.exec("sleep 300 & echo $!")).stdout.strip()
        detached = (
            await sb.exec(
                "setsid env -u PATCHGYM_EXEC sh -c 'sleep 1' </dev/null >/dev/null 2>&1 & echo $!"
            )
        ).stdout.strip()
        assert killed.isdigit() and detached.isdigit()

        async def gone(pid: str) -> bool:
            r = await sb.exec(f"test -e /proc/{pid} && cut -d' ' -f3 /proc/{pid}/stat")
            return r.stdout.strip() == ""

        for pid in (killed, detached):
            assert await eventually(lambda pid=pid: gone(pid)), pid  # type: ignore[misc]


async def test_reap_removes_a_crashed_sandbox_and_its_processes(
    tmp_path: Path, template: Path
) -> None:
    marker = "pgreap" + uuid.uuid4().hex[:10]
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    sb = backend.sandbox(SandboxSpec(template=str(template), run_id="crash"))
    async with sb.session() as sh:
        await sh.run(f"env -i setsid bash -c 'exec -a {marker} sleep 300' > /dev/null 2>&1 &")
        assert await eventually(lambda: bool(host_processes_with(marker)))
        assert await backend.reap({"patchgym.run-id": "crash"}, expired=False)
        assert await eventually(lambda: not host_processes_with(marker))
    await sb.close()
    assert not list((tmp_path / "s").glob("pg-*"))


def test_sync_facade_inside_and_outside_a_running_loop(tmp_path: Path, template: Path) -> None:
    def use() -> str:
        with SyncBackend({"type": "local", "state_dir": str(tmp_path / "s")}) as backend:
            with backend.sandbox(SandboxSpec(template=str(template))) as sb:
                return sb.exec("cat f.txt").stdout

    assert use() == "original\n"

    async def inside_loop() -> str:
        return use()  # blocking call from a coroutine, as a notebook cell would

    assert asyncio.run(inside_loop()) == "original\n"


async def test_a_sandbox_removed_from_outside_is_lost(tmp_path: Path, template: Path) -> None:
    from patchgym_sandbox import SandboxLost

    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    async with backend.sandbox(SandboxSpec(template=str(template), run_id="gone")) as sb:
        await backend.reap({"patchgym.run-id": "gone"}, expired=False)
        with pytest.raises(SandboxLost):
            await sb.exec("true")
        with pytest.raises(SandboxLost):
            await sb.write_file("x.txt", "x")


async def test_reap_unmounts_what_a_killed_driver_left(tmp_path: Path, template: Path) -> None:
    """A SIGKILLed driver leaves its template views and /etc copy mounted; reap removes them."""
    import json
    import subprocess
    import sys

    state = tmp_path / "state"
    args = {"config": {"type": "local", "state_dir": str(state)},
            "spec": {"template": str(template)}, "run_id": "killed", "n": 1}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "patchgym_sandbox.testing.driver", json.dumps(args)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 120)  # type: ignore[union-attr]
        assert line.startswith("READY"), line
    finally:
        proc.kill()
        proc.wait()
    assert str(state) in Path("/proc/self/mountinfo").read_text()
    backend = create_backend({"type": "local", "state_dir": str(state)})
    await backend.reap({L.RUN_ID: "killed"}, expired=False)
    await backend.aclose()
    assert str(state) not in Path("/proc/self/mountinfo").read_text()


async def test_a_layered_environment_is_seen_by_the_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``uv run --with`` runs the driver in an environment that lists its base's
    site-packages in a ``.pth``: the tasks' python must find those packages too (else every
    test run lacks pytest and a correct patch grades 0). Each such environment is mounted."""
    from patchgym_sandbox.local import isolation

    base = Path(tempfile.mkdtemp(prefix="pg-layer-", dir="/var/tmp"))  # not the sandbox's /tmp
    try:
        base.chmod(0o755)  # as an environment is (the sandbox's uid reads it)
        (base / "pyvenv.cfg").write_text("home = /nowhere\n")
        site = base / "lib" / "python3.11" / "site-packages"
        site.mkdir(parents=True)
        (site / "layered_mod.py").write_text("NAME = 'layered'\n")
        monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
        isolation._interpreter_paths.cache_clear()
        assert base in isolation.interpreter_paths()
        backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
        async with backend.sandbox(SandboxSpec()) as sb:
            res = await sb.exec(f"cat {site}/layered_mod.py; touch {site}/x")
        assert res.stdout == "NAME = 'layered'\n" and res.exit_code != 0  # read-only
        await backend.aclose()
    finally:
        isolation._interpreter_paths.cache_clear()
        shutil.rmtree(base)
