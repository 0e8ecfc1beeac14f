"""k8s-specific behaviour on a real cluster: pod shape, labels, files, large requests, retries."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio
from conftest import HOST_NETWORK, SESSION_ID, SESSION_LABEL

from patchgym_k8s import metadata, prepull
from patchgym_k8s.backend import K8sBackend
from patchgym_k8s.create import create_pod
from patchgym_k8s.errors import ApiFailure
from patchgym_k8s.manifest import pod_manifest
from patchgym_sandbox import (
    ConfigError,
    InfraError,
    SandboxSpec,
    available_backends,
    create_backend,
    load_config,
)
from patchgym_sandbox import labels as L
from patchgym_sandbox.retry import RetryPolicy
from patchgym_sandbox.testing.waits import eventually


@pytest_asyncio.fixture
async def backend(k8s_config: Callable[..., dict[str, Any]]) -> AsyncIterator[K8sBackend]:
    b = create_backend(
        k8s_config(
            node_selector={"kubernetes.io/hostname": "localhost"},
            tolerations=[{"key": "patchgym.test", "operator": "Exists", "effect": "NoSchedule"}],
            annotations={"example.com/owner": "tests"},
            pod_overrides={"spec": {"dnsPolicy": "Default"}},
            container_overrides={"securityContext": {"readOnlyRootFilesystem": False}},
        )
    )
    assert isinstance(b, K8sBackend)
    yield b
    await b.aclose()


@pytest.fixture
def spec(test_image: str) -> SandboxSpec:
    return SandboxSpec(image=test_image, workdir="/testbed", run_id="backend-tests")


def test_registered_and_validated() -> None:
    assert "k8s" in available_backends()
    cfg = load_config(
        {"type": "k8s", "namespace": "sb", "create_retry": {"attempts": 3, "base_s": 1}}
    )
    assert cfg.type == "k8s"
    with pytest.raises(ConfigError, match="namepsace"):
        load_config({"type": "k8s", "namepsace": "typo"})


def test_label_values_survive_kubernetes_syntax() -> None:
    long_id = "run/" + "x" * 80
    meta = metadata.pod_metadata({L.RUN_ID: long_id, L.MANAGED: "true"}, {})
    stamped = meta["labels"][L.RUN_ID]
    assert len(stamped) <= 63 and stamped == metadata.label_value(long_id)
    assert json.loads(meta["annotations"][metadata.LABELS_ANNOTATION])[L.RUN_ID] == long_id
    assert metadata.label_value("plain-id_1.2") == "plain-id_1.2"


def test_manifest_carries_the_config(k8s_config: Callable[..., dict[str, Any]]) -> None:
    from patchgym_k8s.config import K8sConfig

    cfg = K8sConfig.model_validate(
        k8s_config(
            service_account="runner",
            image_pull_secrets=["regcred"],
            runtime_class="gvisor",
            requests={"cpu": "100m"},
            pod_overrides={"spec": {"priority": 5}},
        )
    )
    spec = SandboxSpec(image="img:1", env={"A": "1"}, user="1000:1000")
    spec.resources.memory_mb = 512
    pod = pod_manifest(cfg, spec, "pg-x", "nonce")
    s = pod["spec"]
    assert s["serviceAccountName"] == "runner" and s["runtimeClassName"] == "gvisor"
    assert s["imagePullSecrets"] == [{"name": "regcred"}] and s["priority"] == 5
    assert s["automountServiceAccountToken"] is False and s["restartPolicy"] == "Never"
    c = s["containers"][0]
    # a limit without a request reserves only a floor (k8s would reserve the whole limit)
    assert c["resources"] == {
        "limits": {"memory": "512Mi"},
        "requests": {"cpu": "100m", "memory": "256Mi"},
    }
    sec = c["securityContext"]
    assert sec["runAsUser"] == 1000 and sec["runAsGroup"] == 1000
    assert sec["allowPrivilegeEscalation"] is False and sec["privileged"] is False
    assert sec["capabilities"]["drop"] == ["ALL"] and "NET_RAW" not in sec["capabilities"]["add"]
    assert sec["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["env"] == [{"name": "A", "value": "1"}]
    with pytest.raises(ConfigError, match="numeric"):
        pod_manifest(cfg, SandboxSpec(image="i", user="alice"), "pg-y", "n")


@pytest.mark.asyncio
async def test_pod_shape_on_the_cluster(backend: K8sBackend, spec: SandboxSpec) -> None:
    async with backend.sandbox(spec) as sb:
        await sb.start()
        pod = await asyncio.to_thread(backend.api.read_pod, sb.id)
        assert pod is not None
        ps = pod["spec"]
        assert ps["nodeSelector"] == {"kubernetes.io/hostname": "localhost"}
        assert ps["tolerations"][0]["key"] == "patchgym.test"
        assert ps["dnsPolicy"] == "Default"
        assert pod["metadata"]["annotations"]["example.com/owner"] == "tests"
        assert pod["metadata"]["labels"][L.RUN_ID] == "backend-tests"
        assert ps["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False


@pytest.mark.asyncio
async def test_large_stdin_env_and_binary_files(backend: K8sBackend, spec: SandboxSpec) -> None:
    async with backend.sandbox(spec) as sb:
        big = bytes(range(256)) * 4096  # 1 MiB, every byte value, too big for argv
        r = await sb.exec("sha256sum | cut -c1-16", stdin=big)
        import hashlib

        assert r.stdout.strip() == hashlib.sha256(big).hexdigest()[:16]
        env = {"BIG": "y" * 100_000}  # one env string may not exceed 128 KiB (Linux)
        assert (await sb.exec('printf %s "$BIG" | wc -c', env=env)).stdout.strip() == "100000"
        blob = bytes(range(256)) * 20_000  # 5 MiB
        await sb.write_file("/tmp/blob.bin", blob, mode=0o600)
        assert await sb.read_file("/tmp/blob.bin") == blob
        assert (await sb.exec("stat -c %a /tmp/blob.bin")).stdout.strip() == "600"


@pytest.mark.asyncio
async def test_create_adopts_own_pod_and_refuses_a_foreign_one(
    backend: K8sBackend, spec: SandboxSpec
) -> None:
    cfg = backend.config
    body = pod_manifest(cfg, spec, "pg-adopt-" + spec.run_id.replace("_", "-")[:20], "nonce-a")  # type: ignore[union-attr]
    name = body["metadata"]["name"]
    try:
        first = await asyncio.to_thread(create_pod, backend.api, body, RetryPolicy(attempts=1))
        again = await asyncio.to_thread(
            create_pod, backend.api, body, RetryPolicy(attempts=1)
        )  # a retried POST that had landed
        assert again["metadata"]["uid"] == first["metadata"]["uid"]
        foreign = pod_manifest(cfg, spec, name, "nonce-b")
        slept: list[float] = []
        with pytest.raises(ApiFailure, match="409") as info:
            await asyncio.to_thread(
                create_pod,
                backend.api,
                foreign,
                RetryPolicy(attempts=3, base_s=0.01, max_s=0.02),
                sleep=slept.append,
            )
        assert info.value.status == 409 and len(slept) == 2  # 409 is retried with the backoff
    finally:
        await backend.remove(name)


@pytest.mark.asyncio
async def test_session_close_kills_its_jobs(backend: K8sBackend, spec: SandboxSpec) -> None:
    async with backend.sandbox(spec) as sb:
        async with sb.session() as sh:
            await sh.run("sleep 305 & disown; true")

        async def none_left() -> bool:
            left = await sb.exec(
                "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done | grep -c '^sleep 305' || true"
            )
            return left.stdout.strip() == "0"

        assert await eventually(none_left)


@pytest.mark.asyncio
async def test_prepare_prepull_daemonset(
    k8s_config: Callable[..., dict[str, Any]], test_image: str
) -> None:
    b = create_backend(
        k8s_config(prepull=True, prepull_pause_image="local/pause:3.4.1", prepull_timeout_s=120)
    )
    plain = create_backend(k8s_config())
    assert isinstance(b, K8sBackend)
    try:
        assert (await plain.prepare([test_image])).ok  # default: no host-side pull at all
        missing = "127.0.0.1:9/patchgym/not-there:1"
        report = await b.prepare([test_image, missing])
        assert set(report.missing) == {missing} and "ErrImagePull" in report.missing[missing]
        report = await b.prepare([test_image])
        assert report.ok and report.pulled == [test_image]
        # prepare returns once its DaemonSet is gone
        assert not await b.call(b.api.list_daemon_sets, f"{SESSION_LABEL}={SESSION_ID}")
    finally:
        await b.aclose()
        await plain.aclose()


async def test_reap_removes_a_prepull_daemonset_left_by_a_crashed_driver(
    k8s_config: Callable[..., dict[str, Any]], test_image: str
) -> None:
    b = create_backend(k8s_config(prepull=True, prepull_pause_image="local/pause:3.4.1"))
    assert isinstance(b, K8sBackend)
    mine = f"{SESSION_LABEL}={SESSION_ID}"
    try:
        name = "patchgym-prepull-crashed" + SESSION_ID[:6]
        await b.call(b.api.create_daemon_set, prepull.daemon_set(b.api, name, [test_image]))
        assert await b.reap({L.RUN_ID: "no-such-run"}, expired=False) == []
        assert await b.call(b.api.list_daemon_sets, mine)  # not selected: kept
        await b.reap({SESSION_LABEL: SESSION_ID}, expired=False)
        assert not await b.call(b.api.list_daemon_sets, mine)
        assert not await b.call(b.api.list_pods, f"{prepull.PREPULL_LABEL}={name}")
    finally:
        await b.aclose()


def _running_pod(spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    state = {"name": "sandbox", "state": {"running": {}}}
    return {
        "metadata": {"name": "pg-x"},
        "spec": spec,
        "status": {"phase": "Running", "containerStatuses": [state], **status},
    }


def test_a_running_pod_without_an_ip_names_host_network() -> None:
    """The kubelet kills a pod the CNI gave no IP within a second: say so at create."""
    from patchgym_k8s.readiness import check

    assert check(_running_pod({}, {"podIP": "10.0.0.7"}), "sandbox", "img")
    assert check(_running_pod({"hostNetwork": True}, {}), "sandbox", "img")
    with pytest.raises(InfraError, match=r"no IP.*host_network"):
        check(_running_pod({}, {}), "sandbox", "img")


@pytest.mark.asyncio
async def test_create_without_pod_networking_names_the_fix(
    k8s_config: Callable[..., dict[str, Any]], spec: SandboxSpec
) -> None:
    """On the loopback-only test cluster a pod off the host network gets no IP: the create
    fails at once with the fix, not later as a broken exec stream (the session's leak check
    sees that the pod went)."""
    if not HOST_NETWORK:
        pytest.skip("this cluster gives pods an IP (PATCHGYM_K8S_HOST_NETWORK=0)")
    b = create_backend(k8s_config(host_network=False))
    try:
        with pytest.raises(InfraError, match="host_network"):
            async with b.sandbox(spec) as sb:
                await sb.start()
    finally:
        await b.aclose()
