"""The security section of the conformance suite against the local backend, default settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from patchgym_sandbox import SandboxSpec
from patchgym_sandbox.testing.security import SandboxSecurity


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("template")
    (root / "README.md").write_text("template repo\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    return root


class TestLocalSecurity(SandboxSecurity):
    """No setting but the state dir: the defaults are the boundary."""

    @pytest.fixture
    def backend_config(self, tmp_path: Path) -> dict[str, Any]:
        return {"type": "local", "state_dir": str(tmp_path / "state")}

    @pytest.fixture
    def sandbox_spec(self, template: Path) -> SandboxSpec:
        return SandboxSpec(template=str(template), workdir="/testbed")
