"""The pod manifest for one sandbox, as a plain JSON-able dict (stable core/v1 fields only)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from patchgym_k8s import metadata
from patchgym_k8s.config import K8sConfig
from patchgym_sandbox.errors import ConfigError
from patchgym_sandbox.remote import SUPERVISOR_PATH, supervisor_source
from patchgym_sandbox.spec import SandboxSpec

# PID 1: write the supervisor (passed as $1) atomically, then sleep until SIGTERM. The shell
# reaps orphans whenever it wakes in `wait`, and exits at once on TERM so deletes are fast.
_INIT = (
    'umask 022; t="$2.$$"; printf "%s" "$1" > "$t" && mv -f "$t" "$2"; '
    "trap 'exit 0' TERM INT; while :; do sleep 86400 & wait $!; done"
)


def deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` merged into a copy of ``base``: dicts recursively, everything else replaced."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


REQUEST_FLOOR = {"memory": 256, "cpu": 100, "ephemeral-storage": 256}
"""What a sandbox reserves per limited resource (Mi, millicores) unless ``requests`` says:
Kubernetes makes an unset request equal to its limit, and a 4 GiB request per pod would
let a node schedule only a handful of sandboxes that mostly sit idle."""


def resources(cfg: K8sConfig, spec: SandboxSpec) -> dict[str, dict[str, str]]:
    limits = dict(cfg.limits)
    requests = dict(cfg.requests)
    r = spec.resources
    for key, value, unit in (
        ("memory", r.memory_mb, "Mi"),
        ("cpu", None if r.cpus is None else int(r.cpus * 1000), "m"),
        ("ephemeral-storage", r.disk_mb, "Mi"),
    ):
        if value is None or key in limits:
            continue
        limits[key] = f"{value}{unit}"
        requests.setdefault(key, f"{min(value, REQUEST_FLOOR[key])}{unit}")
    out: dict[str, dict[str, str]] = {}
    if limits:
        out["limits"] = limits
    if requests:
        out["requests"] = requests
    return out


def run_as(user: str | None) -> dict[str, int]:
    """``SandboxSpec.user`` as a securityContext: numeric ``uid`` or ``uid:gid`` only."""
    if user is None:
        return {}
    uid, _, gid = user.partition(":")
    if not uid.isdigit() or (gid and not gid.isdigit()):
        raise ConfigError(
            f"the k8s backend needs a numeric user ('1000' or '1000:1000'), got {user!r}: "
            "a pod's securityContext cannot name users"
        )
    ctx = {"runAsUser": int(uid)}
    if gid:
        ctx["runAsGroup"] = int(gid)
    return ctx


def seccomp_profile(cfg: K8sConfig) -> dict[str, str]:
    if cfg.seccomp_profile == "Localhost":
        return {"type": "Localhost", "localhostProfile": cfg.seccomp_localhost_profile}
    return {"type": cfg.seccomp_profile}


def security_context(cfg: K8sConfig, spec: SandboxSpec) -> dict[str, Any]:
    """The container's securityContext: no privilege escalation, capabilities dropped."""
    return {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"], "add": list(cfg.cap_add)},
        "seccompProfile": seccomp_profile(cfg),
        "procMount": "Default",  # the runtime's masked and read-only /proc paths
        **run_as(spec.user),
    }


def pod_manifest(cfg: K8sConfig, spec: SandboxSpec, name: str, nonce: str) -> dict[str, Any]:
    if not spec.image:
        raise ConfigError("the k8s backend needs SandboxSpec.image (a container image)")
    meta = metadata.pod_metadata(
        {**cfg.labels, **spec.all_labels(name)},
        {**cfg.annotations, metadata.CREATE_NONCE_ANNOTATION: nonce},
    )
    container: dict[str, Any] = {
        "name": cfg.container_name,
        "image": spec.image,
        "imagePullPolicy": cfg.image_pull_policy,
        "command": [
            "/bin/sh",
            "-c",
            _INIT,
            "patchgym-init",
            supervisor_source().decode(),
            SUPERVISOR_PATH,
        ],
        "workingDir": spec.workdir,
        "env": [{"name": k, "value": v} for k, v in spec.env.items()],
        "resources": resources(cfg, spec),
    }
    container["securityContext"] = security_context(cfg, spec)
    container = deep_merge(container, cfg.container_overrides)
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": cfg.termination_grace_s,
        "automountServiceAccountToken": cfg.automount_service_account_token,
        "enableServiceLinks": False,
        "containers": [container],
    }
    optional: dict[str, Any] = {
        "nodeSelector": dict(cfg.node_selector) or None,
        "tolerations": list(cfg.tolerations) or None,
        "imagePullSecrets": [{"name": s} for s in cfg.image_pull_secrets] or None,
        "serviceAccountName": cfg.service_account,
        "runtimeClassName": cfg.runtime_class,
        "priorityClassName": cfg.priority_class,
        "activeDeadlineSeconds": cfg.active_deadline_s,
        "hostNetwork": True if cfg.host_network else None,
    }
    pod_spec.update({k: v for k, v in optional.items() if v is not None})
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": cfg.namespace, **meta},
        "spec": pod_spec,
    }
    return deep_merge(pod, cfg.pod_overrides)
