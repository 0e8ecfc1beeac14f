"""Config of the ``k8s`` backend (cheap to import: no Kubernetes client here)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from patchgym_sandbox.backend import BackendConfig, CheckRow
from patchgym_sandbox.retry import RetryPolicy

if TYPE_CHECKING:
    from patchgym_k8s.backend import K8sBackend

DEFAULT_CAP_ADD = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL")


class K8sConfig(BackendConfig):
    """One pod per sandbox on a Kubernetes cluster, commands through the exec API.

    Nothing here is specific to one cluster: scheduling (node selector, tolerations,
    runtime class), identity (service account, image pull secrets) and anything else
    the pod spec accepts (``pod_overrides`` / ``container_overrides``) are configurable.
    """

    type: Literal["k8s"] = "k8s"

    # -- where the cluster is ---------------------------------------------------------
    kubeconfig: str | None = None
    """Path to a kubeconfig; None: ``$KUBECONFIG`` / ``~/.kube/config``, else in-cluster."""
    context: str | None = None
    in_cluster: bool = False
    """Use the pod's service account (when the driver itself runs inside the cluster)."""
    namespace: str = "default"

    # -- the pod ----------------------------------------------------------------------
    container_name: str = "sandbox"
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    """Pod tolerations exactly as in the pod spec (camelCase keys)."""
    image_pull_secrets: list[str] = Field(default_factory=list)
    service_account: str | None = None
    automount_service_account_token: bool = False
    """Off by default: a sandbox must not hold credentials for the cluster."""
    runtime_class: str | None = None
    """e.g. ``gvisor`` or ``kata``; None uses the cluster default."""
    priority_class: str | None = None
    host_network: bool = False
    """Only for clusters whose CNI gives pods no IP (the loopback-only test cluster). It
    gives the sandbox the node's network, host loopback included: never for real runs."""
    cap_add: list[str] = Field(default_factory=lambda: list(DEFAULT_CAP_ADD))
    """Capabilities kept after ``drop: [ALL]``: what installs, git and ``su`` need as root."""
    seccomp_profile: Literal["RuntimeDefault", "Localhost", "Unconfined"] = "RuntimeDefault"
    """``RuntimeDefault``: the container runtime's default filter (Kubernetes' own default is
    none). ``Localhost``: patchgym's own policy (:mod:`patchgym_sandbox.seccomp`, the same as
    the local and docker backends), read by the kubelet from ``seccomp_localhost_profile``
    under its seccomp root on each node; write it there with
    ``python -m patchgym_k8s.seccomp_profile /var/lib/kubelet/seccomp``."""
    seccomp_localhost_profile: str = "patchgym.json"
    requests: dict[str, str] = Field(default_factory=dict)
    """Container resource requests, e.g. ``{"cpu": "250m", "memory": "512Mi"}``."""
    limits: dict[str, str] = Field(default_factory=dict)
    """Container limits; ``SandboxSpec.resources`` fills memory/cpu/ephemeral-storage when unset here."""
    termination_grace_s: int = Field(default=1, ge=0)
    active_deadline_s: int | None = Field(default=None, gt=0)
    """Hard pod lifetime enforced by the kubelet (cannot be extended by ``renew``)."""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    pod_overrides: dict[str, Any] = Field(default_factory=dict)
    """Deep-merged into the pod manifest (``{"spec": {...}}``; lists are replaced)."""
    container_overrides: dict[str, Any] = Field(default_factory=dict)
    """Deep-merged into the sandbox container (``securityContext``, ``volumeMounts`` ...)."""
    python: str = "python3"
    """Interpreter in the image that runs the in-sandbox supervisor (Python 3.6+)."""
    exec_mode: Literal["server", "exec"] = "server"
    """``server``: one in-pod exec server per sandbox, started through one long-lived exec
    stream, runs every command (a line each way); ``exec``: one exec stream per command.
    Both run sandbox-core's supervisor inside the pod; ``server`` falls back to ``exec``
    when its server cannot start."""

    # -- timing -------------------------------------------------------------------------
    create_timeout_s: float = Field(default=300.0, gt=0)
    """From the accepted create to a running container (watched, not polled)."""
    create_retry: RetryPolicy = Field(
        default_factory=lambda: RetryPolicy(attempts=6, base_s=5.0, max_s=60.0)
    )
    """Retries of a create refused with 409/429/500/503 (the shared policy; Retry-After wins)."""
    delete_timeout_s: float = Field(default=30.0, gt=0)
    """Wait this long for a deleted pod to go before force-deleting it (grace 0)."""
    wait_for_delete: bool = True
    """``close()`` returns only once the pod is gone."""
    exec_grace_s: float = Field(default=30.0, ge=0)
    """Client-side buffer past an exec's deadline before the stream is abandoned."""
    liveness_check_s: float = Field(default=20.0, gt=0)
    """Silence on an exec stream after which the pod is checked (a deleted pod → SandboxLost)."""
    file_retry: RetryPolicy = Field(
        default_factory=lambda: RetryPolicy(attempts=4, base_s=0.2, max_s=2.0)
    )
    """Retries of idempotent file operations whose stream failed, and of any exec whose
    websocket could not be opened (the command never started). An opened exec is never retried."""
    max_threads: int = Field(default=128, gt=0)
    """Threads for blocking API calls and exec streams (sessions get their own thread)."""

    # -- prepare() ----------------------------------------------------------------------
    prepull: bool = False
    """``prepare(images)`` runs a pre-pull DaemonSet; by default the node pulls on demand."""
    prepull_timeout_s: float = Field(default=600.0, gt=0)
    prepull_pause_image: str = "registry.k8s.io/pause:3.9"
    """Main container of the pre-pull DaemonSet (something tiny that just sleeps)."""

    @field_validator("pod_overrides")
    @classmethod
    def _no_host_pod(cls, v: dict[str, Any]) -> dict[str, Any]:
        spec = v.get("spec") or {}
        for key in ("hostPID", "hostIPC", "hostNetwork"):
            if spec.get(key):
                raise ValueError(
                    f"pod_overrides: spec.{key} shares a host namespace; it is refused"
                )
        for vol in spec.get("volumes") or []:
            if isinstance(vol, dict) and "hostPath" in vol:
                raise ValueError(
                    f"pod_overrides: hostPath volume {vol.get('name')!r} exposes the node; it is refused"
                )
        return v

    @field_validator("container_overrides")
    @classmethod
    def _no_privileged(cls, v: dict[str, Any]) -> dict[str, Any]:
        sec = v.get("securityContext") or {}
        if sec.get("privileged") or sec.get("allowPrivilegeEscalation"):
            raise ValueError(
                "container_overrides: securityContext privileged/allowPrivilegeEscalation is refused"
            )
        return v

    def checks(self) -> list[CheckRow]:
        path = self.kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube/config")
        if self.in_cluster or Path(path).is_file():
            return [CheckRow(name="credentials", status="pass", detail=f"kubeconfig {path}")]
        fix = "export KUBECONFIG=<path> or sandbox.kubeconfig=<path>"
        return [
            CheckRow(name="credentials", status="fail", detail=f"no kubeconfig at {path}", fix=fix)
        ]

    def build(self) -> K8sBackend:
        from patchgym_k8s.backend import K8sBackend

        return K8sBackend(self)
