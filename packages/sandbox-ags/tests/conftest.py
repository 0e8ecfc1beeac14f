"""A stand-in server shared by the tests of this package (real SDK, real processes)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from patchgym_ags.standin.config import StandinConfig
from patchgym_sandbox.errors import IsolationUnavailable
from patchgym_sandbox.spec import SandboxSpec
from patchgym_sandbox.testing.engines import engine_missing

API_KEY = "e2b_standin-test-key-0123456789abcdef"


def standin_config(url: str, **overrides: Any) -> dict[str, Any]:
    """A backend config for the stand-in at ``url``: the ``e2b`` flavour unless overridden."""
    return {
        "type": "e2b",
        "api_key": API_KEY,
        "api_url": url,
        "sandbox_url": url,
        "template": "base",
        "lease_grace_s": 30,
        **overrides,
    }


class E2bStandinTarget:
    """Mix-in that points a shared suite (conformance, security) at the stand-in's ``e2b``.

    Put it before the suite class so its fixtures override the suite's.
    """

    @pytest.fixture
    def backend_config(self, standin: Any) -> dict[str, Any]:
        return standin_config(standin.url)

    @pytest.fixture
    def sandbox_spec(self) -> SandboxSpec:
        return SandboxSpec(workdir="/testbed")


@pytest.fixture(scope="session")
def standin_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("template")
    (d / "README.txt").write_text("template file\n")
    return d


@pytest.fixture(scope="session")
def standin(standin_template: Path) -> Iterator[object]:
    try:
        from patchgym_ags.standin.server import StandinServer
        from patchgym_sandbox.local.isolation import bwrap_path

        bwrap_path()
    except IsolationUnavailable as exc:
        engine_missing(f"the e2b stand-in needs bubblewrap: {exc}")
    state = Path(tempfile.mkdtemp(prefix="pg-standin-"))
    config = StandinConfig(
        api_key=SecretStr(API_KEY),
        templates={"base": None, "pg-repo": standin_template},
        images={"registry.example/task:1": standin_template},
        state_dir=state,
    )
    with StandinServer(config) as srv:
        yield srv
    shutil.rmtree(state, ignore_errors=True)
