"""The local backend against the whole conformance suite: isolated (default) in both
working-copy modes, and with the explicit ``isolation: none`` opt-out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from patchgym_sandbox import SandboxSpec
from patchgym_sandbox.testing import SandboxConformance


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("template")
    (root / "README.md").write_text("template repo\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    return root


class TestLocalOverlay(SandboxConformance):
    @pytest.fixture
    def backend_config(self, tmp_path: Path) -> dict[str, Any]:
        return {"type": "local", "state_dir": str(tmp_path / "state"), "copy_mode": "auto"}

    @pytest.fixture
    def sandbox_spec(self, template: Path) -> SandboxSpec:
        return SandboxSpec(template=str(template))


class TestLocalCopy(TestLocalOverlay):
    @pytest.fixture
    def backend_config(self, tmp_path: Path) -> dict[str, Any]:
        return {"type": "local", "state_dir": str(tmp_path / "state"), "copy_mode": "copy"}


class TestLocalUnisolated(TestLocalOverlay):
    """``isolation: none`` (the explicit opt-out) keeps the same behaviour, without a boundary."""

    @pytest.fixture
    def backend_config(self, tmp_path: Path) -> dict[str, Any]:
        return {"type": "local", "state_dir": str(tmp_path / "state"), "isolation": "none"}
