"""Real SWE-bench-form rows whose repository is a released sdist committed with fixed dates.

No git host is reachable here (the package index is): a release's sdist, committed with a
fixed author and date, always gives the same commit, which the row names as its base.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path


def git_env(date: str) -> dict[str, str]:
    return {
        **os.environ,
        "GIT_AUTHOR_NAME": "patchgym",
        "GIT_AUTHOR_EMAIL": "tasks@patchgym.invalid",
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": "patchgym",
        "GIT_COMMITTER_EMAIL": "tasks@patchgym.invalid",
        "GIT_COMMITTER_DATE": date,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }


def pip_download(spec: str, dest: Path) -> Path:
    """The sdist of ``spec`` through pip (the interpreter's, else uv's tool run of pip)."""
    args = ["download", "-q", "--no-deps", "--no-binary", ":all:", spec, "-d", str(dest)]
    pip = [sys.executable, "-m", "pip"]
    if subprocess.run([*pip, "--version"], capture_output=True).returncode != 0:
        pip = ["uv", "tool", "run", "--from", "pip", "pip"]
    subprocess.run([*pip, *args], check=True, capture_output=True, timeout=600)
    (sdist,) = dest.glob("*.tar.gz")
    return sdist


def sdist_repo(spec: str, root: Path, *, date: str, message: str, base_commit: str) -> Path:
    """``spec``'s sdist as a one-commit git repository; asserts it is ``base_commit``."""
    sdist = pip_download(spec, root / "dl")
    repo = root / "repo"
    with tarfile.open(sdist) as tar:
        tar.extractall(root / "x", filter="data")
    shutil.move(str(next((root / "x").iterdir())), repo)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", message]):
        subprocess.run(
            ["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args],
            cwd=repo, env=git_env(date), check=True, capture_output=True,
        )  # fmt: skip
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True)
    assert head.stdout.strip() == base_commit, f"{spec}'s sdist no longer commits to the row's base"
    return repo
