from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def template_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small repository the local backend's suites start their sandboxes from (one per module)."""
    root = tmp_path_factory.mktemp("template")
    (root / "README.md").write_text("template repo\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    return root
