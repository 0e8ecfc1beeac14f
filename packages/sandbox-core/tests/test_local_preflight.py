"""The local backend's own preflight rows: whether its isolation starts a sandbox here."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from patchgym_sandbox import load_config
from patchgym_sandbox.backend import CheckRow
from patchgym_sandbox.local import isolation


def rows(**cfg: Any) -> dict[str, CheckRow]:
    return {r.name: r for r in load_config({"type": "local", **cfg}).checks()}


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_the_isolation_row_passes_where_bwrap_starts_a_sandbox() -> None:
    row = rows()["isolation"]
    assert row.status == "pass", row
    assert isolation.bwrap_path() in row.detail


def test_the_isolation_row_names_the_fix_where_bwrap_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A fresh GPU node without bubblewrap: the row says so, with the fix (before, only
    the images row failed, with a generic "install the backend package")."""
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no bwrap on it
    isolation.bwrap_path.cache_clear()
    try:
        row = rows()["isolation"]
    finally:
        isolation.bwrap_path.cache_clear()
    assert row.status == "fail", row
    assert "bubblewrap" in row.detail and isolation.FIX not in row.detail
    assert row.fix == isolation.FIX


def test_no_isolation_is_a_warning_not_a_pass() -> None:
    row = rows(isolation="none")["isolation"]
    assert row.status == "warn" and "no security boundary" in row.detail
