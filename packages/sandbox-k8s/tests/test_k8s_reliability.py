"""Reliability on a real cluster: lost pods, leftover processes, missing images, leases."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from patchgym_k8s.backend import K8sBackend
from patchgym_sandbox import (
    ConfigError,
    ImageNotFound,
    SandboxLost,
    SandboxSpec,
    create_backend,
)
from patchgym_sandbox import labels as L

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def backend(k8s_config: Callable[..., dict[str, Any]]) -> AsyncIterator[K8sBackend]:
    b = create_backend(k8s_config())
    assert isinstance(b, K8sBackend)
    yield b
    await b.aclose()


@pytest.fixture
def spec(test_image: str) -> SandboxSpec:
    return SandboxSpec(image=test_image, workdir="/testbed", run_id="reliability")


async def test_pod_deleted_during_exec_is_sandbox_lost(
    backend: K8sBackend, spec: SandboxSpec
) -> None:
    async with backend.sandbox(spec) as sb:
        running = asyncio.create_task(sb.exec("echo started; sleep 120", timeout=300))
        await asyncio.sleep(1.0)
        # From outside: a plain delete with the cluster's defaults, as an operator would.
        await asyncio.to_thread(
            backend.api.core.delete_namespaced_pod, sb.id, backend.config.namespace
        )
        t0 = time.monotonic()
        with pytest.raises(SandboxLost):
            await asyncio.wait_for(running, 90)
        print(f"SandboxLost {time.monotonic() - t0:.1f}s after the delete")
        with pytest.raises(SandboxLost):
            await sb.exec("true")


async def test_background_child_past_deadline_leaves_nothing(
    backend: K8sBackend, spec: SandboxSpec
) -> None:
    async with backend.sandbox(spec) as sb:
        cmd = (
            "nohup sleep 301 >/dev/null 2>&1 & setsid sleep 302 >/dev/null 2>&1 < /dev/null & "
            "(trap '' TERM HUP; sleep 303) & sleep 304"
        )
        r = await sb.exec(cmd, timeout=2)
        assert r.timed_out and r.exit_code == 124
        scan = await sb.exec(
            "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f 2>/dev/null; echo; done | grep -c '^sleep 30[1-4]' || true"
        )
        assert scan.stdout.strip() == "0", f"processes survived the deadline: {scan.output}"


async def test_nonexistent_image_fails_fast(k8s_config: Callable[..., dict[str, Any]]) -> None:
    b = create_backend(k8s_config(image_pull_policy="IfNotPresent", create_timeout_s=600))
    try:
        # A registry that refuses connections (nothing listens on 127.0.0.1:9): the kubelet's
        # pull fails at once. (A docker.io name would first wait out this machine's DNS.)
        # (InvalidImageName fails the same way, but this cluster's kubelet reports it ~60 s late.)
        for image in ("127.0.0.1:9/patchgym/does-not-exist:nope",):
            t0 = time.monotonic()
            with pytest.raises(ImageNotFound) as info:
                await b.sandbox(SandboxSpec(image=image, run_id="reliability")).start()
            # create_timeout_s is 600: raising ImageNotFound (not CreateTimeout) is the fast path.
            print(f"{image}: ImageNotFound after {time.monotonic() - t0:.1f}s: {info.value}")
        assert not await b.list_sandboxes({L.RUN_ID: "reliability"})
    finally:
        await b.aclose()


async def test_never_pull_policy_fails_fast(k8s_config: Callable[..., dict[str, Any]]) -> None:
    b = create_backend(k8s_config(image_pull_policy="Never"))
    try:
        with pytest.raises(ImageNotFound, match="ErrImageNeverPull"):
            await b.sandbox(
                SandboxSpec(image="local/patchgym-missing:1", run_id="reliability")
            ).start()
    finally:
        await b.aclose()


async def test_renew_moves_the_lease(backend: K8sBackend, spec: SandboxSpec) -> None:
    async with backend.sandbox(spec.model_copy(update={"lease_s": 1.0, "run_id": "renew"})) as sb:
        await sb.renew(3600)
        await asyncio.sleep(1.5)
        assert sb.id not in await backend.reap(expired=True)
        (info,) = await backend.list_sandboxes({L.SANDBOX_ID: sb.id})
        assert int(info.labels[L.EXPIRES_AT]) > time.time() + 3000
        assert (await sb.exec("true")).ok


async def test_unknown_runtime_class_is_a_config_error(
    k8s_config: Callable[..., dict[str, Any]], spec: SandboxSpec
) -> None:
    b = create_backend(k8s_config(runtime_class="patchgym-no-such-runtime"))
    try:
        with pytest.raises(ConfigError, match="RuntimeClass"):
            await b.sandbox(spec).start()
    finally:
        await b.aclose()


async def test_killed_exec_server_is_the_commands_doing(
    backend: K8sBackend, spec: SandboxSpec
) -> None:
    """A command that kills the in-pod exec server ends with exit 137 (the kubelet saw the
    server exit: not infra, so a policy cannot turn a bad rollout into a dropped one); the
    server restarts on the next command, and concurrent commands share it."""
    async with backend.sandbox(spec) as sb:
        assert (await sb.exec("true")).ok
        r = await sb.exec("kill -9 $PPID; sleep 1")  # the command's parent is the server
        assert r.exit_code == 137 and "killed the sandbox's exec server" in r.stderr
        assert (await sb.exec("echo again")).stdout == "again\n"
        many = await asyncio.gather(*(sb.exec(f"sleep 0.3; echo {i}") for i in range(8)))
        assert [m.stdout for m in many] == [f"{i}\n" for i in range(8)]
        big = bytes(range(256)) * 8192  # 2 MiB of stdin through the server's request line
        assert (await sb.exec("wc -c", stdin=big)).stdout.strip() == str(len(big))
