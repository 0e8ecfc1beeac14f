"""The security section of the conformance suite (``patchgym_sandbox.testing.security``)
against the k8s backend with default settings, on the real cluster.

What a pod spec cannot prevent is declared with the reason (see the package README).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from conftest import HOST_NETWORK

from patchgym_sandbox import SandboxSpec
from patchgym_sandbox.testing.security import SandboxSecurity

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
if HOST_NETWORK:
    CANNOT_PREVENT["reach_host_loopback"] = (
        "the loopback-only test cluster runs pods with host_network (its CNI gives pods no IP), "
        "so the node's loopback is the pod's; on a real CNI pods have their own network namespace"
    )


class TestK8sSecurity(SandboxSecurity):
    cannot_prevent: ClassVar[dict[str, str]] = CANNOT_PREVENT

    @pytest.fixture
    def backend_config(self, k8s_config: Callable[..., dict[str, Any]]) -> dict[str, Any]:
        return k8s_config()

    @pytest.fixture
    def sandbox_spec(self, test_image: str) -> SandboxSpec:
        return SandboxSpec(image=test_image, workdir="/testbed")
