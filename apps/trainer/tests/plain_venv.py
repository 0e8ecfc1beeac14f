"""Ground truth for a real row: its test files in a plain venv, beside the build under test.

The venv holds the era's packages (``uv pip install --exclude-newer``) and the repository
installed by its own pip; each patch runs in its own clone of the mirror (so several
verdicts can be taken at once), with the row's test patch applied, under ``pytest -rA``.
"""

from __future__ import annotations

import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sdist_rows import git_env

from patchgym_envs.localbuild.errors import Unbuildable
from patchgym_envs.localbuild.pythons import find_python
from patchgym_trainer.cli import main

STATUS = re.compile(r"^(PASSED|FAILED|ERROR) (\S+)")


def cli(argv: list[str]) -> int:
    """``patchgym ARGV``'s exit code."""
    with pytest.raises(SystemExit) as code:
        main(argv)
    return int(code.value.code or 0)


def python_or_skip(version: str, why: str) -> str:
    try:
        return find_python(version)
    except Unbuildable as exc:
        pytest.skip(f"{why} needs Python {version}: {exc}")


def test_files(test_patch: str) -> list[str]:
    """The files a test patch touches (``+++ b/<path>``)."""
    return re.findall(r"^\+\+\+ b/(\S+)$", test_patch, flags=re.MULTILINE)


class GroundTruth:
    """The row's test files in a plain venv: the era's packages, ``pip install -e .``."""

    def __init__(
        self, row: dict[str, Any], mirror: Path, root: Path, python: str, *, as_of: str,
        packages: tuple[str, ...] = ("numpy", "pytest"), offline: bool = False,
    ) -> None:  # fmt: skip
        self.row, self.mirror, self.root = row, mirror, root
        self.offline = ["unshare", "--map-root-user", "--net"] if offline else []
        """``offline``: the tests run in a network namespace of their own (loopback only), as
        in a sandbox, whatever the host can reach."""
        self.f2p: list[str] = json.loads(row["FAIL_TO_PASS"])
        self.p2p: list[str] = json.loads(row["PASS_TO_PASS"])
        self.repo = self.clone("install")
        venv = root / "venv"
        self.python = str(venv / "bin" / "python")
        subprocess.run(["uv", "venv", "-q", "--python", python, str(venv)], check=True)
        subprocess.run(
            ["uv", "pip", "install", "-q", "--python", self.python, "--exclude-newer", as_of,
             "pip", "setuptools", "wheel", *packages],
            check=True,
        )  # fmt: skip
        subprocess.run(
            [self.python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
             "-e", "."],
            cwd=self.repo, check=True, capture_output=True,
        )  # fmt: skip

    def clone(self, name: str) -> Path:
        path = self.root / name
        subprocess.run(["git", "clone", "-q", str(self.mirror), str(path)], check=True)
        return path

    def log(self, patch: str, name: str) -> str:
        """The ``pytest -rA`` output of the row's test files under ``patch`` (in a fresh clone
        named ``name``, first on the import path, with a temporary folder of its own, as a
        sandbox has: runs at once must not share ``/tmp``, where pydicom's
        ``test_UTF8_filename`` copies to and removes one fixed name, failing whichever run
        finds it gone)."""
        repo = self.clone(name)
        git = ["git", "-c", "core.hooksPath=/dev/null"]
        for diff in (patch, self.row["test_patch"]):
            if diff.strip():
                subprocess.run(
                    [*git, "apply", "-"], cwd=repo, input=diff, text=True, check=True,
                    env=git_env("2000-01-01T00:00:00+00:00"),
                )  # fmt: skip
        tmp = self.root / f"{name}.tmp"
        tmp.mkdir()
        done = subprocess.run(
            [*self.offline, self.python, "-m", "pytest", "-rA", "-p", "no:cacheprovider",
             *test_files(self.row["test_patch"])],
            cwd=repo, capture_output=True, text=True, check=False,
            env={**git_env("2000-01-01T00:00:00+00:00"), "PYTHONPATH": str(repo),
                 "TMPDIR": str(tmp)},
        )  # fmt: skip
        return done.stdout

    def statuses(self, patch: str, name: str = "run") -> dict[str, str]:
        return self.statuses_of(self.log(patch, name))

    @staticmethod
    def statuses_of(log: str) -> dict[str, str]:
        """Test id -> PASSED/FAILED/ERROR from a ``pytest -rA`` log."""
        out = {}
        for line in log.splitlines():
            m = STATUS.match(line)
            if m:
                out[m.group(2)] = m.group(1)
        return out

    def resolved_by(self, statuses: dict[str, str]) -> bool:
        """SWE-bench's verdict on ``statuses``: every FAIL_TO_PASS and PASS_TO_PASS passed."""
        return all(statuses.get(t) == "PASSED" for t in (*self.f2p, *self.p2p))

    def resolved(self, patch: str, name: str = "run") -> bool:
        return self.resolved_by(self.statuses(patch, name))

    def verdicts(self, patches: dict[str, str]) -> dict[str, dict[str, str]]:
        """``statuses`` of several patches at once (name -> patch), each in its own clone."""
        with ThreadPoolExecutor(len(patches)) as pool:
            runs = {n: pool.submit(self.statuses, p, n) for n, p in patches.items()}
            return {n: r.result() for n, r in runs.items()}
