"""Fixtures for the k8s backend tests: a real cluster, a test image, no leaked pods.

The cluster is found through ``$KUBECONFIG`` (default ``/tmp/k8s/kubeconfig``, where
``ci/engines/k8s-up.sh`` writes it). Tests skip, saying why, only when no API
server answers. Every backend built here stamps a per-session label, so the leak check
only sees this session's pods.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from patchgym_k8s.testing import cluster_problem

DEFAULT_KUBECONFIG = "/tmp/k8s/kubeconfig"
KUBECONFIG = os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
TEST_IMAGE = os.environ.get("PATCHGYM_TEST_IMAGE", "local/patchgym-testbed:latest")
FALLBACK_IMAGE = "local/bookworm-py:latest"
BUILD_SCRIPT = (
    Path(__file__).resolve().parents[2] / "sandbox-docker" / "tests" / "images" / "build.sh"
)
HOST_NETWORK = os.environ.get("PATCHGYM_K8S_HOST_NETWORK", "1") != "0"
"""The loopback-only test cluster gives pods no IP, and its kubelet then restarts every
pod's sandbox; host-network pods are exempt. Set PATCHGYM_K8S_HOST_NETWORK=0 on a cluster
with a real CNI."""
SESSION_LABEL = "patchgym.test-session"
SESSION_ID = uuid.uuid4().hex[:12]

warnings.filterwarnings("ignore", message="Unverified HTTPS request")


def pytest_configure(config: pytest.Config) -> None:
    # the test cluster's kubeconfig skips TLS verification; urllib3 would warn on every call
    config.addinivalue_line("filterwarnings", "ignore:Unverified HTTPS request")


def session_config(**overrides: Any) -> dict[str, Any]:
    """A JSON-serialisable backend config for this test session."""
    base: dict[str, Any] = {
        "type": "k8s",
        "kubeconfig": KUBECONFIG,
        "namespace": "default",
        "host_network": HOST_NETWORK,
        "labels": {SESSION_LABEL: SESSION_ID},
        "create_timeout_s": 120,
        "create_retry": {"attempts": 4, "base_s": 0.2, "max_s": 0.8},
    }
    base.update(overrides)
    return base


def _cluster_problem() -> str | None:
    return cluster_problem(KUBECONFIG)


@pytest.fixture(scope="session")
def cluster() -> str:
    problem = _cluster_problem()
    if problem:
        pytest.skip(problem)
    return KUBECONFIG


@pytest.fixture(scope="session")
def test_image(cluster: str) -> str:
    """The shared sandbox test image when it exists (or can be built), else the plain base."""
    have = subprocess.run(["docker", "image", "inspect", TEST_IMAGE], capture_output=True)
    if have.returncode != 0 and BUILD_SCRIPT.exists():
        subprocess.run(["bash", str(BUILD_SCRIPT), TEST_IMAGE], capture_output=True, timeout=900)
        have = subprocess.run(["docker", "image", "inspect", TEST_IMAGE], capture_output=True)
    return TEST_IMAGE if have.returncode == 0 else FALLBACK_IMAGE


@pytest.fixture(scope="session")
def k8s_config(cluster: str) -> Callable[..., dict[str, Any]]:
    return session_config


def _session_pods() -> list[str]:
    from kubernetes import client, config

    conf = client.Configuration()
    config.load_kube_config(config_file=KUBECONFIG, client_configuration=conf)
    with client.ApiClient(conf) as api:
        resp: Any = client.CoreV1Api(api).list_namespaced_pod(
            "default",
            label_selector=f"{SESSION_LABEL}={SESSION_ID}",
            _request_timeout=30,
            _preload_content=False,
        )
        names = [str(p["metadata"]["name"]) for p in json.loads(resp.data)["items"]]
        for name in names:
            client.CoreV1Api(api).delete_namespaced_pod(name, "default", grace_period_seconds=0)
    return names


@pytest.fixture(scope="session", autouse=True)
def no_leaked_pods() -> Iterator[None]:
    """After the whole session no pod with this session's label may remain."""
    yield
    if _cluster_problem():
        return
    left = _session_pods()
    assert not left, f"pods leaked by this test session (now force-deleted): {left}"
