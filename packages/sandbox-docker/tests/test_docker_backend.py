"""Docker-specific behaviour on the real engine: container settings, files, prepare, registry."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import pytest

from patchgym_docker import DockerConfig
from patchgym_docker.backend import DockerBackend
from patchgym_docker.sandbox import DockerSandbox
from patchgym_sandbox import (
    ConfigError,
    Resources,
    SandboxFileNotFound,
    SandboxSpec,
    available_backends,
    create_backend,
    load_config,
)
from patchgym_sandbox import labels as L

Config = Callable[..., dict[str, Any]]


@pytest.fixture
def spec(test_image: str) -> SandboxSpec:
    return SandboxSpec(image=test_image)


def test_registry_entry_point_and_config_errors() -> None:
    assert "docker" in available_backends()
    assert isinstance(load_config({"type": "docker"}), DockerConfig)
    with pytest.raises(ConfigError, match="netwrk_mode"):
        load_config({"type": "docker", "netwrk_mode": "host"})


@pytest.mark.asyncio
async def test_container_settings(
    backend: DockerBackend, spec: SandboxSpec, engine: docker.DockerClient
) -> None:
    s = backend.sandbox(
        spec,
        run_id="settings-run",
        rollout_id="rollout-7",
        resources=Resources(memory_mb=256, cpus=0.5, pids=64),
        labels={"team": "rl"},
    )
    assert isinstance(s, DockerSandbox)
    async with s:
        attrs = engine.api.inspect_container(s.container_id)
        labels, host = attrs["Config"]["Labels"], attrs["HostConfig"]
        assert labels[L.RUN_ID] == "settings-run" and labels[L.ROLLOUT_ID] == "rollout-7"
        assert (
            labels[L.MANAGED] == "true" and labels[L.SANDBOX_ID] == s.id and labels["team"] == "rl"
        )
        # labels cannot be renewed: the default lease is stamped as a whole episode's
        assert int(labels[L.EXPIRES_AT]) >= time.time() + 3000
        assert host["NetworkMode"] == "none"
        assert host["Init"] is True
        assert host["Memory"] == 256 * 1024 * 1024
        assert host["NanoCpus"] == 500_000_000
        assert host["PidsLimit"] == 64
        # init as PID 1 (reaps zombies), no network interfaces but loopback
        assert "init" in (await s.exec("tr '\\0' ' ' < /proc/1/cmdline")).stdout
        assert (await s.exec("ls /sys/class/net")).stdout.split() == ["lo"]


@pytest.mark.asyncio
async def test_limits_are_enforced(backend: DockerBackend, spec: SandboxSpec) -> None:
    async with backend.sandbox(spec, resources=Resources(memory_mb=64, pids=64)) as s:
        hog = await s.exec(
            "python3 -c 'x = bytearray(256 * 1024 * 1024); print(len(x))'", timeout=60
        )
        assert hog.exit_code != 0 and "268435456" not in hog.stdout
        forks = await s.exec(
            "for i in $(seq 200); do sleep 30 & done 2>&1 | tail -1; true", timeout=60
        )
        assert "Resource temporarily unavailable" in forks.output or "fork" in forks.output
        assert (await s.exec("echo alive")).stdout == "alive\n"


@pytest.mark.asyncio
async def test_zombies_are_reaped_by_init(backend: DockerBackend, spec: SandboxSpec) -> None:
    async with backend.sandbox(spec) as s:
        # the orphan's parent (a setsid'd subshell) exits at once; init must reap the orphan later
        await s.exec("setsid bash -c 'sleep 0.2 &' ; sleep 0.5", timeout=30)
        zombies = await s.exec(
            "for f in /proc/[0-9]*/stat; do read -r l < $f 2>/dev/null && s=${l##*) } && "
            '[ "${s%% *}" = Z ] && echo $f; done; true'
        )
        assert zombies.stdout == ""


@pytest.mark.asyncio
async def test_image_set_lazily(backend: DockerBackend, test_image: str) -> None:
    s = backend.sandbox()
    s.spec.image = test_image  # may change until first use
    async with s:
        assert (await s.exec("git -C /testbed log --format=%s")).stdout.strip() == "initial commit"


@pytest.mark.asyncio
async def test_missing_image_in_spec_is_a_config_error(backend: DockerBackend) -> None:
    with pytest.raises(ConfigError, match="image"):
        await backend.sandbox().start()


@pytest.mark.asyncio
async def test_large_files_and_commands(backend: DockerBackend, spec: SandboxSpec) -> None:
    async with backend.sandbox(spec) as s:
        big = bytes(range(256)) * (96 * 1024)  # 24 MiB
        await s.write_file("/tmp/deep/er/big.bin", big, mode=0o600)
        assert (await s.exec("stat -c '%s %a' /tmp/deep/er/big.bin")).stdout.split() == [
            str(len(big)),
            "600",
        ]
        assert await s.read_file("/tmp/deep/er/big.bin") == big
        # a command far above the 128 KiB argv limit, with a big stdin: spilled to a file
        text = "x" * 300_000
        r = await s.exec(
            f"cat > /tmp/heredoc.txt <<'EOF'\n{text}\nEOF\nwc -c < /tmp/heredoc.txt; wc -c",
            stdin=text,
        )
        assert r.stdout.split() == ["300001", "300000"], r.output[-500:]
        assert (await s.exec("ls -a /tmp | grep -c patchgym-req; true")).stdout.strip() == "0"


@pytest.mark.asyncio
async def test_read_file_edge_cases(backend: DockerBackend, spec: SandboxSpec) -> None:
    async with backend.sandbox(spec) as s:
        await s.exec("ln -s pkg/calc.py link.py && mkdir -p d")
        assert (await s.read_text("link.py")).startswith("def add")
        with pytest.raises(SandboxFileNotFound, match="directory"):
            await s.read_file("d")
        with pytest.raises(SandboxFileNotFound):
            await s.read_file("/nope/nothing.txt")
        await s.put_archive("/tmp/new/dir", b"")  # missing destination directories are created
        assert (await s.exec("test -d /tmp/new/dir")).ok


@pytest.mark.asyncio
async def test_prepare_reports_missing_images(docker_config: Config, test_image: str) -> None:
    backend = create_backend(docker_config(pull="never"))
    report = await backend.prepare([test_image, "local/patchgym-does-not-exist:1", test_image])
    assert report.present == [test_image]
    assert list(report.missing) == ["local/patchgym-does-not-exist:1"] and not report.ok
    await backend.aclose()
    pulling = create_backend(docker_config(pull="missing", show_progress=True))
    report = await pulling.prepare(["localhost:1/patchgym/nothing:1"])  # no registry listens there
    assert "localhost:1/patchgym/nothing:1" in report.missing and not report.pulled
    assert "pull failed" in report.missing["localhost:1/patchgym/nothing:1"]
    await pulling.aclose()


@pytest.mark.asyncio
async def test_list_and_remove_by_label(backend: DockerBackend, spec: SandboxSpec) -> None:
    a = await backend.sandbox(spec, run_id="list-a").start()
    b = await backend.sandbox(spec, run_id="list-b").start()
    try:
        assert [i.id for i in await backend.list_sandboxes({L.RUN_ID: "list-a"})] == [a.id]
        assert await backend.reap({L.RUN_ID: "list-b"}, expired=False) == [b.id]
        assert not await backend.list_sandboxes({L.RUN_ID: "list-b"})
        await backend.remove(b.id)  # already gone: not an error
    finally:
        await a.close()
        await b.close()


@pytest.mark.asyncio
async def test_upload_and_download_stream(
    backend: DockerBackend, spec: SandboxSpec, tmp_path: Path
) -> None:
    """A 96 MiB tree goes both ways without ever being held in memory whole."""
    src = tmp_path / "src"
    (src / "nested").mkdir(parents=True)
    with (src / "nested" / "big.bin").open("wb") as fh:
        for i in range(96):
            fh.write(bytes([i]) * (1 << 20))
    (src / "small.txt").write_text("small\n")
    async with backend.sandbox(spec) as s:
        tracemalloc.start()
        try:
            await s.upload(src, "/tmp/missing/parent/up")  # parents created on the way
            _, up_peak = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            await s.download("/tmp/missing/parent/up", tmp_path / "back")
            _, down_peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        r = await s.exec(
            "wc -c < /tmp/missing/parent/up/nested/big.bin; cat /tmp/missing/parent/up/small.txt"
        )
        assert r.stdout.split() == [str(96 << 20), "small"]
    back = tmp_path / "back" / "nested" / "big.bin"
    assert back.stat().st_size == 96 << 20
    with back.open("rb") as fh:
        assert all(fh.read(1 << 20) == bytes([i]) * (1 << 20) for i in range(96))
    assert (tmp_path / "back" / "small.txt").read_text() == "small\n"
    print(f"peak traced memory: upload {up_peak >> 20} MiB, download {down_peak >> 20} MiB")
    assert up_peak < 48 << 20 and down_peak < 48 << 20, (up_peak, down_peak)
