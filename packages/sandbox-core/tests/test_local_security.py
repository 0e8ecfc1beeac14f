"""The security section of the conformance suite against the local backend, default settings."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from patchgym_sandbox import SandboxSpec
from patchgym_sandbox.testing.security import SandboxSecurity


class TestLocalSecurity(SandboxSecurity):
    """No setting but the state dir: the defaults are the boundary."""

    @pytest.fixture
    def backend_config(self, tmp_path: Path) -> dict[str, Any]:
        return {"type": "local", "state_dir": str(tmp_path / "state")}

    @pytest.fixture
    def sandbox_spec(self, template_repo: Path) -> SandboxSpec:
        return SandboxSpec(template=str(template_repo), workdir="/testbed")


@pytest.mark.skipif(shutil.which("runsc") is None, reason="isolation: gvisor needs runsc")
class TestLocalGvisorSecurity(TestLocalSecurity):
    """``isolation: gvisor``: the same attacks against the sandbox under runsc."""

    @pytest.fixture
    def backend_config(self, tmp_path: Path) -> dict[str, Any]:
        return {"type": "local", "state_dir": str(tmp_path / "state"), "isolation": "gvisor"}
