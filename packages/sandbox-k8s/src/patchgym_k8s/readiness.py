"""Wait for a created pod to run, by watching it (no polling), failing fast on bad images."""

from __future__ import annotations

import time
from typing import Any

from patchgym_k8s.client import Api
from patchgym_sandbox.errors import CreateTimeout, ImageNotFound, InfraError, SandboxLost

IMAGE_ERRORS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
)


def _container_status(pod: dict[str, Any], container: str) -> dict[str, Any]:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == container:
            return dict(cs)
    return {}


def summary(pod: dict[str, Any], container: str) -> str:
    """One line on where the pod is stuck (phase, waiting reason, unschedulable message)."""
    status = pod.get("status") or {}
    parts = [f"phase={status.get('phase', '?')}"]
    state = _container_status(pod, container).get("state") or {}
    for kind in ("waiting", "terminated"):
        if kind in state:
            s = state[kind] or {}
            parts.append(f"{kind}={s.get('reason')}: {s.get('message', '')}".rstrip(": "))
    for cond in status.get("conditions") or []:
        if cond.get("status") == "False" and cond.get("message"):
            parts.append(f"{cond.get('type')}: {cond.get('message')}")
    return "; ".join(parts)


def check(pod: dict[str, Any], container: str, image: str) -> bool:
    """True when the sandbox container runs; raises when it never will."""
    status = pod.get("status") or {}
    phase = status.get("phase")
    cs = _container_status(pod, container)
    state = cs.get("state") or {}
    waiting = state.get("waiting") or {}
    if waiting.get("reason") in IMAGE_ERRORS:
        raise ImageNotFound(
            f"image {image!r} cannot be used: {waiting.get('reason')}: {waiting.get('message', '')}; "
            "check the name, the registry credentials (image_pull_secrets) or pre-load it on the nodes"
        )
    if phase in ("Failed", "Succeeded") or "terminated" in state:
        raise InfraError(
            f"the sandbox pod {pod['metadata']['name']} stopped before it was ready ({summary(pod, container)}); "
            "the image needs /bin/sh and sleep"
        )
    running = phase == "Running" and "running" in state
    if running and _without_ip(pod):
        raise InfraError(
            f"the sandbox pod {pod['metadata']['name']} runs but the cluster's network plugin "
            "gave it no IP, so the kubelet restarts its pod sandbox and kills the container "
            "within a second. Fix the cluster's CNI; on a test cluster without pod networking "
            "set host_network: true (sandbox.host_network=true)"
        )
    return running


def _without_ip(pod: dict[str, Any]) -> bool:
    """A running pod the network plugin gave no IP (a host-network pod has the node's)."""
    if (pod.get("spec") or {}).get("hostNetwork"):
        return False
    status = pod.get("status") or {}
    return not status.get("podIP") and not status.get("podIPs")


def wait_running(
    api: Api, pod: dict[str, Any], container: str, image: str, timeout_s: float
) -> dict[str, Any]:
    """Watch ``pod`` (as returned by create) until its container runs; returns the last object."""
    name = pod["metadata"]["name"]
    deadline = time.monotonic() + timeout_s
    last = pod
    rv: str | None = pod["metadata"].get("resourceVersion")
    if check(last, container, image):
        return last
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CreateTimeout(
                f"pod {name} was not running after {timeout_s:.0f}s ({summary(last, container)}); "
                "raise create_timeout_s or check the cluster's capacity"
            )
        for kind, obj in api.watch_pod(name, rv, remaining):
            if kind == "ERROR":
                rv = None  # resourceVersion too old (410): re-read and watch from now
                fresh = api.read_pod(name)
                if fresh is None:
                    raise SandboxLost(f"pod {name} was deleted while starting")
                last = fresh
                rv = fresh["metadata"].get("resourceVersion")
                if check(last, container, image):
                    return last
                break
            if kind == "DELETED":
                raise SandboxLost(
                    f"pod {name} was deleted while starting ({summary(obj, container)})"
                )
            last = obj
            rv = obj["metadata"].get("resourceVersion", rv)
            if check(last, container, image):
                return last
            if time.monotonic() >= deadline:
                break
