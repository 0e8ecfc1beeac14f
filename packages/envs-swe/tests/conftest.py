"""Shared fixtures: a real local backend with its own state dir, and the dataset rows."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

# Bundled templates are materialised into a cache; keep the tests' copy private.
os.environ.setdefault("PATCHGYM_CACHE_DIR", tempfile.mkdtemp(prefix="patchgym-envs-cache-"))

from patchgym_sandbox import SandboxBackend, SandboxSpec, create_backend


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    d = tmp_path / "local-state"
    d.mkdir()
    return d


@pytest.fixture
def local_config(state_dir: Path) -> dict[str, Any]:
    return {"type": "local", "state_dir": str(state_dir)}


@pytest.fixture
async def backend(local_config: dict[str, Any]) -> AsyncIterator[SandboxBackend]:
    b = create_backend(local_config)
    try:
        yield b
    finally:
        await b.reap(expired=False, labels={"patchgym.managed": "true"})
        await b.aclose()


@pytest.fixture
def sync_backend(local_config: dict[str, Any]) -> Iterator[SandboxBackend]:
    b = create_backend(local_config)
    yield b


def docker_config(*tasks: str) -> dict[str, Any]:
    """The docker backend's config once it can run the bundled ``tasks`` (their images
    built); a missing backend package or base image is an engine missing (a failure in CI)."""
    from patchgym_sandbox import available_backends
    from patchgym_sandbox.testing import engine_missing

    if "docker" not in available_backends():
        engine_missing("the docker backend (patchgym-sandbox-docker) is not installed")
    from patchgym_envs.bundled.docker import base_image_problem, build_image

    if (reason := base_image_problem()) is not None:
        engine_missing(reason)
    for task in tasks:
        build_image(task)
    return {"type": "docker"}


@pytest.fixture
def specs(backend: SandboxBackend, monkeypatch: pytest.MonkeyPatch) -> list[SandboxSpec]:
    """Every spec the real backend is asked to build (a control grading would add one)."""
    seen: list[SandboxSpec] = []
    make = backend.sandbox

    def recording(spec: SandboxSpec) -> Any:
        seen.append(spec)
        return make(spec)

    monkeypatch.setattr(backend, "sandbox", recording)
    return seen
