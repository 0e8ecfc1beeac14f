"""The k8s backend against the whole conformance suite, on a real cluster."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from patchgym_sandbox import SandboxSpec
from patchgym_sandbox.testing import SandboxConformance


class TestK8sConformance(SandboxConformance):
    reap_sandboxes = 8
    """The issue's reliability test: SIGKILL a driver holding 8 pods, then reap."""

    @pytest.fixture
    def backend_config(self, k8s_config: Callable[..., dict[str, Any]]) -> dict[str, Any]:
        return k8s_config()

    @pytest.fixture
    def sandbox_spec(self, test_image: str) -> SandboxSpec:
        return SandboxSpec(image=test_image, workdir="/testbed")


class TestK8sConformancePerExec(TestK8sConformance):
    """``exec_mode="exec"``: one exec stream of the supervisor per command (the fallback)."""

    reap_sandboxes = 3

    @pytest.fixture
    def backend_config(self, k8s_config: Callable[..., dict[str, Any]]) -> dict[str, Any]:
        return k8s_config(exec_mode="exec")
