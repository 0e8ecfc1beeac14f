"""Fixtures for the docker backend tests: a real engine, the test image, no leaked containers.

Every backend built here stamps a per-session label, so the leak check and the reaper only
ever see this test session's containers (other runs may share the engine).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
import pytest_asyncio

from patchgym_docker.backend import DockerBackend
from patchgym_sandbox import create_backend
from patchgym_sandbox.testing import engine_missing

IMAGES_DIR = Path(__file__).parent / "images"
TEST_IMAGE = os.environ.get("PATCHGYM_TEST_IMAGE", "local/patchgym-testbed:latest")
SESSION_LABEL = "patchgym.test-session"
REQUIRE_VAR = "PATCHGYM_REQUIRE_DOCKER"
"""Set to 1 (CI) to turn "no engine" into a failure instead of a skip."""
SESSION_ID = uuid.uuid4().hex[:12]


def session_config(**overrides: Any) -> dict[str, Any]:
    """A JSON-serialisable backend config for this test session."""
    return {
        "type": "docker",
        "labels": {SESSION_LABEL: SESSION_ID},
        "show_progress": False,
        **overrides,
    }


@pytest.fixture(scope="session")
def docker_config() -> Callable[..., dict[str, Any]]:
    """``docker_config(**overrides)``: this session's backend config (tests import nothing)."""
    return session_config


class DefaultDockerTarget:
    """Mix-in that points a shared suite (conformance, security) at the default backend.

    Put it before the suite class so its fixture overrides the suite's.
    """

    @pytest.fixture
    def backend_config(
        self, test_image: str, docker_config: Callable[..., dict[str, Any]]
    ) -> dict[str, Any]:
        return docker_config()


def _engine_problem() -> str | None:
    try:
        client = docker.from_env(timeout=10)
        client.ping()
        client.close()
    except Exception as exc:
        return f"no Docker engine reachable ({exc}); start one with ci/engines/docker-up.sh"
    return None


@pytest_asyncio.fixture
async def backend(
    docker_config: Callable[..., dict[str, Any]], test_image: str
) -> AsyncIterator[DockerBackend]:
    """A backend with this session's default config, closed after the test."""
    b = create_backend(docker_config())
    assert isinstance(b, DockerBackend)
    yield b
    await b.aclose()


@pytest.fixture(scope="session")
def engine() -> Iterator[docker.DockerClient]:
    problem = _engine_problem()
    if problem and os.environ.get(REQUIRE_VAR) == "1":
        pytest.fail(f"{problem} ({REQUIRE_VAR}=1: CI must not skip engine tests)")
    if problem:
        engine_missing(problem)  # fails under PATCHGYM_REQUIRE_ENGINES=1 (CI)
    client = docker.from_env(timeout=60)
    yield client
    client.close()


@pytest.fixture(scope="session")
def test_image(engine: docker.DockerClient) -> str:
    """The test image (python3, git, a tiny repository in /testbed), built once if needed."""
    build = subprocess.run(
        ["bash", str(IMAGES_DIR / "build.sh"), TEST_IMAGE],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert build.returncode == 0, f"test image build failed:\n{build.stdout}\n{build.stderr}"
    return TEST_IMAGE


@pytest.fixture(scope="session", autouse=True)
def no_leaked_containers() -> Iterator[None]:
    """After the whole session, no container with this session's label may remain."""
    yield
    if _engine_problem():
        return
    client = docker.from_env(timeout=60)
    try:
        left = client.containers.list(all=True, filters={"label": f"{SESSION_LABEL}={SESSION_ID}"})
        names = [c.name for c in left]
        for c in left:
            c.remove(force=True)
    finally:
        client.close()
    assert not names, f"leaked containers with our labels after the test session: {names}"
