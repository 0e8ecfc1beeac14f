"""The shared conformance suite through the unmodified e2b SDK against the local stand-in."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from conftest import E2bStandinTarget, standin_config

from patchgym_sandbox.spec import SandboxSpec
from patchgym_sandbox.testing import SandboxConformance


class TestE2bStandin(E2bStandinTarget, SandboxConformance):
    concurrency: ClassVar[int] = 32


class TestAgsStandinCommands(SandboxConformance):
    """The ``ags`` flavour: image override via x-custom-config, commands.run (bash -l) path."""

    concurrency: ClassVar[int] = 8
    reap_sandboxes: ClassVar[int] = 2

    @pytest.fixture
    def backend_config(self, standin: Any) -> dict[str, Any]:
        return standin_config(
            standin.url,
            type="ags",
            image_registry_type="personal",
            exec_via="commands",
        )

    @pytest.fixture
    def sandbox_spec(self) -> SandboxSpec:
        return SandboxSpec(image="registry.example/task:1", workdir="/testbed")
