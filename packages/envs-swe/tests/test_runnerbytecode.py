"""The test runner local sandboxes borrow is byte-compiled from the host, once."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from patchgym_envs.runnerbytecode import RUNNER_MODULES, RUNNER_PACKAGES, compile_modules
from patchgym_envs.sandboxes import borrows_this_interpreter

PROBE = """
import sys
before = set(sys.modules)
import pytest
pytest.main(["-q", "-rA", "-p", "no:cacheprovider"])
stdlib = set(sys.stdlib_module_names) | set(sys.builtin_module_names)
print("IMPORTED", " ".join(sorted(m for m in set(sys.modules) - before if m.split(".")[0] not in stdlib)))
"""


def _pyc(source: Path) -> Path:
    return Path(importlib.util.cache_from_source(str(source)))


def test_missing_bytecode_is_written_and_fresh_bytecode_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "pgrb_runnerpkg"
    (package / "sub").mkdir(parents=True)
    sources = [package / "__init__.py", package / "sub" / "__init__.py", package / "sub" / "m.py"]
    single = tmp_path / "pgrb_runnermod.py"
    for path in [*sources, single]:
        path.write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()

    assert compile_modules(["pgrb_runnerpkg", "pgrb_runnermod", "pgrb_not_installed"])
    written = {path: _pyc(path).stat().st_mtime_ns for path in [*sources, single]}

    assert compile_modules(["pgrb_runnerpkg", "pgrb_runnermod"])  # up to date: not rewritten
    assert {path: _pyc(path).stat().st_mtime_ns for path in written} == written
    assert "pgrb_runnerpkg" not in sys.modules  # found, compiled, never imported


def test_one_module_of_a_package_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "pgrb_bigpkg"
    (package / "lexers").mkdir(parents=True)
    for path in (package / "__init__.py", package / "lexers" / "__init__.py"):
        path.write_text("")
    (package / "lexers" / "python.py").write_text("X = 1\n")
    (package / "lexers" / "cobol.py").write_text("X = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()

    assert compile_modules([], ["pgrb_bigpkg.lexers.python", "pgrb_bigpkg.lexers"])
    assert _pyc(package / "lexers" / "python.py").is_file()
    assert _pyc(package / "lexers" / "__init__.py").is_file()
    assert not _pyc(package / "lexers" / "cobol.py").exists()
    assert not _pyc(package / "__init__.py").exists()


def test_the_list_covers_every_module_pytest_imports(tmp_path: Path) -> None:
    """A pytest upgrade that imports a new package fails here (its runs would compile it)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        capture_output=True,
        text=True,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("IMPORTED"))
    imported = set(line.split()[1:])
    assert "_pytest" in imported  # the probe ran pytest
    missed = {m for m in imported if m.split(".")[0] not in RUNNER_PACKAGES} - set(RUNNER_MODULES)
    assert not missed, sorted(missed)


def test_only_this_interpreter_is_compiled_for() -> None:
    assert borrows_this_interpreter(None)
    assert borrows_this_interpreter(sys.executable)
    assert not borrows_this_interpreter("/opt/elsewhere/bin/python3")
