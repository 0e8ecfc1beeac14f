"""Repositories at a task's base commit: one cached mirror per upstream repo, one template
(a self-contained git clone checked out at ``base_commit``) per task.

A mirror comes from a git URL or a local path given in config (``mirrors: {owner/name:
source}``); without one, ``https://github.com/<owner/name>.git``. Templates are built in a
temporary sibling folder and renamed into place, so a failed checkout leaves nothing behind.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from patchgym_envs.gitclean import reduce_to_base
from patchgym_envs.localbuild.errors import BuildFailed

GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}


def git(*args: str, cwd: Path | None = None, timeout: float = 1800) -> str:
    done = subprocess.run(
        ["git", "-c", "advice.detachedHead=false", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise BuildFailed(f"git {' '.join(args[:2])} failed: {done.stderr.strip()[-400:]}")
    return done.stdout.strip()


class RepoCache:
    """Bare mirrors under ``root/mirrors``, shared by every task of the same repository."""

    def __init__(self, root: Path, sources: Mapping[str, str] | None = None) -> None:
        self.root = root
        self.sources = dict(sources or {})

    def source(self, repo: str) -> str:
        return self.sources.get(repo) or f"https://github.com/{repo}.git"

    def mirror(self, repo: str) -> Path:
        path = self.root / "mirrors" / (repo.replace("/", "__") + ".git")
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (path / "HEAD").is_file():
                tmp = Path(tempfile.mkdtemp(prefix=".mirror-", dir=path.parent))
                try:
                    try:
                        git("clone", "-q", "--mirror", self.source(repo), str(tmp / "m.git"))
                    except BuildFailed as exc:
                        raise BuildFailed(
                            f"{exc} (offline? give a local copy: --mirror {repo}=PATH)"
                        ) from None
                    (tmp / "m.git").rename(path)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
        return path

    def checkout(self, repo: str, commit: str, dest: Path) -> Path:
        """A self-contained clone of ``repo`` at ``commit`` in ``dest`` (built once)."""
        if (dest / ".git").is_dir():
            return dest
        mirror = self.mirror(repo)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
        try:
            git("clone", "-q", "--no-checkout", str(mirror), str(tmp))
            try:
                git("checkout", "-q", commit, cwd=tmp)
            except BuildFailed as exc:
                raise BuildFailed(f"base_commit {commit} is not in {self.source(repo)}") from exc
            git("remote", "remove", "origin", cwd=tmp)
            reduce_to_base(tmp, commit)  # no later commits, tags or remotes in the template
            tmp.rename(dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return dest
