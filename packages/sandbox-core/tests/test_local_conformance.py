"""The local backend against the whole conformance suite: isolated (default) in both
working-copy modes, and with the explicit ``isolation: none`` opt-out."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from patchgym_sandbox import SandboxSpec
from patchgym_sandbox.testing import SandboxConformance


class TestLocalOverlay(SandboxConformance):
    fork_outside_workdir = "$TMPDIR"  # /tmp inside; the sandbox's own tmp without isolation

    @pytest.fixture
    def backend_config(self, tmp_path: Path) -> dict[str, Any]:
        return {"type": "local", "state_dir": str(tmp_path / "state"), "copy_mode": "auto"}

    @pytest.fixture
    def sandbox_spec(self, template_repo: Path) -> SandboxSpec:
        return SandboxSpec(template=str(template_repo))


class TestLocalCopy(TestLocalOverlay):
    @pytest.fixture
    def backend_config(self, tmp_path: Path) -> dict[str, Any]:
        return {"type": "local", "state_dir": str(tmp_path / "state"), "copy_mode": "copy"}


class TestLocalUnisolated(TestLocalOverlay):
    """``isolation: none`` (the explicit opt-out) keeps the same behaviour, without a boundary."""

    @pytest.fixture
    def backend_config(self, tmp_path: Path) -> dict[str, Any]:
        return {"type": "local", "state_dir": str(tmp_path / "state"), "isolation": "none"}


@pytest.mark.skipif(shutil.which("runsc") is None, reason="isolation: gvisor needs runsc")
class TestLocalGvisor(TestLocalOverlay):
    """``isolation: gvisor``: the same sandbox under runsc (the strongest local mode)."""

    @pytest.fixture
    def backend_config(self, tmp_path: Path) -> dict[str, Any]:
        return {"type": "local", "state_dir": str(tmp_path / "state"), "isolation": "gvisor"}
