"""The fixtures every backend suite shares, so a backend names its engine the same way to each.

:class:`~patchgym_sandbox.testing.SandboxConformance` and
:class:`~patchgym_sandbox.testing.security.SandboxSecurity` both build on
:class:`BackendSuite`. A backend's test class provides two fixtures: ``backend_config`` (a
JSON-serialisable mapping for :func:`~patchgym_sandbox.registry.create_backend`) and
``sandbox_spec``. The suite turns them into ``backend`` (closed after the test) and ``sb``
(one started sandbox, labelled with the suite's :attr:`BackendSuite.run_id`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar

import pytest
import pytest_asyncio

from patchgym_sandbox.backend import SandboxBackend
from patchgym_sandbox.registry import create_backend
from patchgym_sandbox.sandbox import Sandbox
from patchgym_sandbox.spec import SandboxSpec


class BackendSuite:
    run_id: ClassVar[str] = "suite"
    """The run id of the ``sb`` sandbox (it names the suite in the sandbox's labels)."""

    @pytest.fixture
    def backend_config(self) -> Mapping[str, Any]:
        raise NotImplementedError("provide a `backend_config` fixture")

    @pytest.fixture
    def sandbox_spec(self) -> SandboxSpec:
        raise NotImplementedError("provide a `sandbox_spec` fixture")

    @pytest.fixture
    def before_backend(self) -> None:
        """What must hold before the backend is built: nothing here; a suite that must set
        the driver's side up first (the security suite's planted secret) overrides it."""

    @pytest_asyncio.fixture
    async def backend(
        self, backend_config: Mapping[str, Any], before_backend: None
    ) -> AsyncIterator[SandboxBackend]:
        b = create_backend(backend_config)
        yield b
        await b.aclose()

    @pytest_asyncio.fixture
    async def sb(
        self, backend: SandboxBackend, sandbox_spec: SandboxSpec
    ) -> AsyncIterator[Sandbox]:
        async with backend.sandbox(sandbox_spec, run_id=self.run_id) as s:
            yield s
