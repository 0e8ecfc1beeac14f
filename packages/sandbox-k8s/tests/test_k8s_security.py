"""The security section of the conformance suite (``patchgym_sandbox.testing.security``)
against the k8s backend with default settings, on the real cluster.

What a pod spec cannot prevent is declared with the reason (see the package README).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import HOST_NETWORK

from patchgym_k8s import seccomp_profile
from patchgym_sandbox import SandboxSpec
from patchgym_sandbox.testing.security import SandboxSecurity

OOM_SCORE = (
    "a pod spec cannot add read-only /proc paths (procMount has only Default and Unmasked) "
    "and container root, node root on 1.20, keeps CAP_DAC_OVERRIDE (cap_add: installs, "
    "git) over its processes' /proc files; the kubelet sets the container's score by QoS "
    "class, and a sandbox its own processes end is the policy's failure (patchgym_envs.blame)"
)
CANNOT_PREVENT = {
    "exceed_process_count": (
        "a pod spec has no pids limit: Kubernetes limits processes per pod only node-wide "
        "(kubelet --pod-max-pids / podPidsLimit), which the cluster operator sets"
    ),
    "exceed_disk": (
        "ephemeral-storage limits are enforced by kubelet eviction after the fact, not by a "
        "failing write; the pod is evicted, the writes first succeed"
    ),
}
CANNOT_PREVENT.update({
    "sandbox_root_is_host_root": (
        "Kubernetes 1.20 has no user namespaces for pods (hostUsers: false is 1.25+ and needs "
        "runtime support): container root is node root, held back by dropped capabilities, "
        "seccomp and the runtime's read-only /proc/sys"
    ),
    "host_paths_in_mount_table": (
        "the runtime's overlay2 storage driver mounts the container root from its layers' "
        "paths under the node's data root (lowerdir=/var/lib/docker/overlay2/...)"
    ),
    "host_paths_in_cgroup": (
        "the dockershim runtime on cgroup v1 gives pods no cgroup namespace and a pod spec "
        "has no field for one"
    ),
    "raise_init_oom_score": OOM_SCORE,
    "raise_exec_server_oom_score": OOM_SCORE,
})  # fmt: skip
KUBELET_SECCOMP = Path(os.environ.get("PATCHGYM_KUBELET_SECCOMP", "/var/lib/kubelet/seccomp"))
"""The test node's kubelet ``--seccomp-profile-root`` (its default): the node is this machine."""
if not KUBELET_SECCOMP.parent.is_dir():
    CANNOT_PREVENT["dangerous_system_calls"] = (
        f"the node's kubelet root ({KUBELET_SECCOMP.parent}) is not on this machine, so "
        "patchgym's Localhost profile cannot be installed; RuntimeDefault allows io_uring "
        "and ptrace on this runtime"
    )
    CANNOT_PREVENT["limit_init_and_exec_server"] = (
        "without patchgym's Localhost profile (see dangerous_system_calls) RuntimeDefault "
        "lets root inside prlimit the container's other processes"
    )
if HOST_NETWORK:
    CANNOT_PREVENT["reach_host_loopback"] = (
        "the loopback-only test cluster runs pods with host_network (its CNI gives pods no IP), "
        "so the node's loopback is the pod's; on a real CNI pods have their own network namespace"
    )


class TestK8sSecurity(SandboxSecurity):
    cannot_prevent: ClassVar[dict[str, str]] = CANNOT_PREVENT

    @pytest.fixture
    def backend_config(self, k8s_config: Callable[..., dict[str, Any]]) -> dict[str, Any]:
        if KUBELET_SECCOMP.parent.is_dir():
            seccomp_profile.install(KUBELET_SECCOMP)
            return k8s_config(seccomp_profile="Localhost")
        return k8s_config()

    @pytest.fixture
    def sandbox_spec(self, test_image: str) -> SandboxSpec:
        return SandboxSpec(image=test_image, workdir="/testbed")
