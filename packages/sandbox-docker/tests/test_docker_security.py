"""Attacks from inside a docker sandbox, as a hostile root policy would run them (issue 12).

Every test runs the attack for real on the engine and asserts it fails: the driver's host
and its processes stay untouched. Docker-specific settings (capabilities, no-new-privileges,
default limits, refused host-sharing config) are checked on the container itself.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from patchgym_docker.backend import DockerBackend
from patchgym_docker.config import DEFAULT_CAP_ADD
from patchgym_docker.sandbox import DockerSandbox
from patchgym_sandbox import (
    ConfigError,
    PathOutsideSandbox,
    SandboxFileNotFound,
    SandboxSpec,
    load_config,
    seccomp,
)
from patchgym_sandbox.testing.waits import eventually

Config = Callable[..., dict[str, Any]]
CANARY_VAR = "PATCHGYM_DRIVER_CANARY"
# CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID: bits 0 1 3 4 5 6 7
EXPECTED_CAP_EFF = "00000000000000fb"


@pytest.fixture
def spec(test_image: str) -> SandboxSpec:
    return SandboxSpec(image=test_image, workdir="/testbed")


@pytest.fixture
def canary(monkeypatch: pytest.MonkeyPatch) -> str:
    """A secret in the driver's environment that must never be readable from inside."""
    value = f"secret-{uuid.uuid4().hex}"
    monkeypatch.setenv(CANARY_VAR, value)
    return value


@pytest.fixture
def host_dir(tmp_path: Path) -> Path:
    """A host directory with a secret file; links planted inside point here."""
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.txt").write_text("host secret\n")
    return host


@pytest.fixture
def loopback_server() -> Iterator[int]:
    """A TCP server on the host's loopback; a sandbox must not reach it."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    hits: list[bool] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            hits.append(True)
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield int(srv.getsockname()[1])
    stop.set()
    t.join(2)
    srv.close()
    assert not hits, "a sandbox connected to the host's loopback server"


@pytest.mark.asyncio
async def test_hardened_by_default(
    backend: DockerBackend, spec: SandboxSpec, engine: docker.DockerClient
) -> None:
    async with backend.sandbox(spec) as s:
        assert isinstance(s, DockerSandbox)
        host = engine.api.inspect_container(s.container_id)["HostConfig"]
        assert host["CapDrop"] == ["ALL"] and sorted(host["CapAdd"]) == sorted(DEFAULT_CAP_ADD)
        assert host["SecurityOpt"][0] == "no-new-privileges"
        assert host["SecurityOpt"][1:] == [f"seccomp={seccomp.docker_profile_json()}"]
        assert host["MaskedPaths"] == list(seccomp.MASKED_PATHS)
        assert host["ReadonlyPaths"] == [*seccomp.READONLY_PATHS, *seccomp.INIT_OOM_PATHS]
        assert host["CgroupnsMode"] == "private"
        assert host["Privileged"] is False and host["NetworkMode"] == "none"
        assert host["PidsLimit"] == 1024 and host["Memory"] == 4096 << 20
        assert not host.get("Binds") and not host.get("Mounts")
        status = (
            await s.exec("grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp)' /proc/self/status")
        ).stdout
        assert "Seccomp:\t2" in status
        assert f"CapEff:\t{EXPECTED_CAP_EFF}" in status
        assert f"CapBnd:\t{EXPECTED_CAP_EFF}" in status
        assert "NoNewPrivs:\t1" in status
        # what the dropped capabilities forbid, tried as root
        denied = await s.exec(
            "mknod /tmp/dev-sda b 8 0 || echo MKNOD-DENIED; "
            "mount -t tmpfs none /mnt 2>&1 || echo MOUNT-DENIED; "
            "chroot / true 2>&1 || echo CHROOT-DENIED"
        )
        for word in ("MKNOD-DENIED", "MOUNT-DENIED", "CHROOT-DENIED"):
            assert word in denied.stdout, denied.output
        # what tests and installs need still works as root
        ok = await s.exec(
            "useradd -M probe 2>/dev/null || true; touch /tmp/f && chown 1000:1000 /tmp/f "
            "&& chmod 4755 /tmp/f && su -s /bin/sh nobody -c true && echo FINE"
        )
        assert ok.stdout.strip().endswith("FINE"), ok.output


def test_host_sharing_config_is_refused() -> None:
    for extra, word in [
        ({"privileged": True}, "privileged"),
        ({"pid_mode": "host"}, "pid_mode"),
        ({"binds": ["/var/run/docker.sock:/var/run/docker.sock"]}, "docker.sock"),
        ({"binds": {"/run": {"bind": "/host-run", "mode": "ro"}}}, "/run"),
        ({"binds": ["/:/host:ro"]}, "'/'"),
        ({"devices": ["/dev/sda:/dev/sda"]}, "devices"),
    ]:
        with pytest.raises(ConfigError, match="extra_host_config") as info:
            load_config({"type": "docker", "extra_host_config": extra})
        assert word in str(info.value)


@pytest.mark.asyncio
async def test_no_engine_socket_inside(backend: DockerBackend, spec: SandboxSpec) -> None:
    async with backend.sandbox(spec) as s:
        found = await s.exec("find / -xdev -type s 2>/dev/null; ls /proc/1/root/run 2>&1")
        assert ".sock" not in found.stdout, found.output
        probe = await s.exec(
            'python3 -c "import socket,sys\n'
            "for p in ['/var/run/docker.sock','/run/docker.sock','/run/containerd/containerd.sock']:\n"
            "  s=socket.socket(socket.AF_UNIX)\n"
            "  try: s.connect(p); print('CONNECTED', p)\n"
            "  except OSError as e: print('refused', p, e.errno)\n\""
        )
        assert "CONNECTED" not in probe.stdout and probe.stdout.count("refused") == 3


@pytest.mark.asyncio
async def test_host_loopback_unreachable(
    backend: DockerBackend, spec: SandboxSpec, loopback_server: int
) -> None:
    async with backend.sandbox(spec) as s:
        r = await s.exec(
            'python3 -c "import socket\n'
            f"try: socket.create_connection(('127.0.0.1', {loopback_server}), 3); print('CONNECTED')\n"
            "except OSError as e: print('refused', e)\"",
            timeout=30,
        )
        assert "CONNECTED" not in r.stdout, r.output


@pytest.mark.asyncio
async def test_driver_environment_unreadable(
    backend: DockerBackend, spec: SandboxSpec, canary: str
) -> None:
    async with backend.sandbox(spec) as s:
        r = await s.exec(
            "cat /proc/*/environ /proc/$PPID/environ 2>/dev/null | tr '\\0' '\\n'; env", timeout=30
        )
        assert canary not in r.output
        await s.exec("ln -s /proc/self/environ self-env; ln -s /proc/1/environ init-env")
        for link in ("self-env", "init-env"):
            try:
                data = await s.read_file(link)
            except SandboxFileNotFound:
                continue
            assert canary.encode() not in data


@pytest.mark.asyncio
async def test_driver_file_ops_never_leave_the_container(
    backend: DockerBackend, spec: SandboxSpec, host_dir: Path, canary: str, tmp_path: Path
) -> None:
    """Links planted by the agent resolve inside the container's root, never on the host."""
    async with backend.sandbox(spec) as s:
        await s.exec(
            f"ln -s / escape && ln -s {host_dir} hostdir && ln -s {host_dir}/secret.txt secret "
            "&& mkdir -p sub && ln -s ../../../../.. sub/up"
        )
        for path in (
            "secret",
            "hostdir/secret.txt",
            f"escape{host_dir}/secret.txt",
            f"sub/up{host_dir}/secret.txt",
            f"/testbed/../../..{host_dir}/secret.txt",
        ):
            with pytest.raises(SandboxFileNotFound):
                await s.read_file(path)
        for path in (
            f"escape{host_dir}/planted-1",
            f"sub/up{host_dir}/planted-2",
            "hostdir/planted-3",
        ):
            await s.write_file(path, "pwned")  # lands inside the container's own root
        await s.write_file("secret", "replaced")  # replaces the link itself, in the container
        assert sorted(p.name for p in host_dir.iterdir()) == ["secret.txt"]
        assert (host_dir / "secret.txt").read_text() == "host secret\n"
        inside = await s.exec(f"ls {host_dir}; cat /testbed/secret")
        assert "planted-1" in inside.stdout and "replaced" in inside.stdout
        # download: links that leave the downloaded tree are refused, never followed on the host
        await s.exec(f"ln -s {host_dir}/secret.txt secret-2")
        for link in ("escape", "hostdir", "secret-2"):
            with pytest.raises(PathOutsideSandbox):
                await s.download(link, tmp_path / f"dl-{link}")
        await s.exec(f"mkdir -p tree && ln -s {host_dir}/secret.txt tree/evil && echo x > tree/ok")
        with pytest.raises(PathOutsideSandbox):
            await s.download("tree", tmp_path / "dl-tree")
        assert not (tmp_path / "dl-tree" / "evil").is_symlink()
        # upload through a planted link lands in the container
        src = tmp_path / "up.txt"
        src.write_text("uploaded")
        await s.upload(src, f"escape{host_dir}/uploaded.txt")
        assert sorted(p.name for p in host_dir.iterdir()) == ["secret.txt"]


@pytest.mark.asyncio
async def test_kill_driver_and_outlive_close(
    backend: DockerBackend, spec: SandboxSpec, engine: docker.DockerClient
) -> None:
    marker = f"pg-survivor-{uuid.uuid4().hex[:8]}"
    async with backend.sandbox(spec) as s:
        assert isinstance(s, DockerSandbox)
        cid = s.container_id
        r = await s.exec(f"kill -9 {os.getpid()} {os.getppid()} 2>&1; echo done")
        assert "done" in r.stdout, r.output  # the driver's pids are not in the container
        await s.exec(
            f"env -i /usr/bin/setsid /bin/bash -c 'exec -a {marker} sleep 600' >/dev/null 2>&1 & "
            f"nohup bash -c '(exec -a {marker}-2 sleep 700 &)' >/dev/null 2>&1 & "
            # end only once the scrubbed one has escaped (no token, own session)
            f"until cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -q '[{marker[0]}]{marker[1:]} 600'; "
            "do sleep 0.1; done",
            timeout=120,
        )

        async def started() -> bool:
            procs = await s.exec("cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
            return f"{marker} " in procs.stdout

        assert await eventually(started)  # the scrubbed, setsid one outlived its exec
    with pytest.raises(docker.errors.NotFound):
        engine.api.inspect_container(cid)
    survivors = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            survivors.append(pid)
    assert not survivors, f"processes of a closed sandbox still run on the host: {survivors}"
