"""The docker backend against the whole sandbox conformance suite, on the real engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import DefaultDockerTarget

from patchgym_sandbox import Resources, SandboxSpec
from patchgym_sandbox.testing import SandboxConformance


class TestDockerConformance(DefaultDockerTarget, SandboxConformance):
    """Default mode: every command goes through the sandbox's in-container exec server."""

    concurrency = 16
    fork_outside_workdir = "/usr/local"  # fork commits the whole container
    reap_sandboxes = 8  # issue 3: SIGKILL the driver while 8 sandboxes run, then reap

    @pytest.fixture
    def sandbox_spec(self, test_image: str) -> SandboxSpec:
        return SandboxSpec(
            image=test_image, workdir="/testbed", resources=Resources(memory_mb=512, pids=512)
        )


class TestDockerConformancePerExec(TestDockerConformance):
    """``exec_mode="exec"``: one ``docker exec`` of the supervisor per command."""

    @pytest.fixture
    def backend_config(
        self, test_image: str, docker_config: Callable[..., dict[str, Any]]
    ) -> dict[str, Any]:
        return docker_config(exec_mode="exec")
