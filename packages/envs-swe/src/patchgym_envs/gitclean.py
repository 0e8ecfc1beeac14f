"""No future in ``.git``: reduce a repository to its base commit's history.

A template cloned from an upstream mirror holds every later commit, its tags, remote
branches, reflogs and stashes: ``git log --all --grep`` or ``git show <tag>:<file>``
hands a policy the upstream fix. :func:`reduce_to_base` keeps one branch at the base
commit and only the objects reachable from it: no tags, remotes, other refs, reflogs,
alternates, ``FETCH_HEAD``/``ORIG_HEAD``, commit-graphs or packs holding later commits.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

BRANCH = "main"
_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
}
_OPTS = ("-c", "core.hooksPath=/dev/null", "-c", "gc.auto=0", "-c", "core.fsmonitor=false")
_STATE_FILES = (
    "FETCH_HEAD",
    "ORIG_HEAD",
    "MERGE_HEAD",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "BISECT_LOG",
    "shallow",
    "packed-refs.lock",
)
_STATE_DIRS = ("logs", "refs/original", "rr-cache", "modules", "worktrees")


class GitCleanError(RuntimeError):
    """A git step of :func:`reduce_to_base` failed (the repository may be half reduced)."""


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *_OPTS, *args],
        cwd=repo,
        env={**os.environ, **_ENV},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise GitCleanError(f"git {' '.join(args[:3])} in {repo}: {done.stderr.strip()[-400:]}")
    return done.stdout


def reduce_to_base(repo: Path, base: str = "HEAD") -> str:
    """Leave ``repo`` with ``base``'s history only; return the base commit's sha.

    HEAD becomes branch ``main`` at the base commit (the working tree and index are not
    touched), every other ref and remote is deleted, reflogs and state files removed,
    objects borrowed through alternates copied in, and everything is repacked into one
    pack of the objects reachable from the base commit (or the index); the rest is
    pruned.
    """
    sha = _git(repo, "rev-parse", "--verify", f"{base}^{{commit}}").strip()
    gitdir = Path(_git(repo, "rev-parse", "--absolute-git-dir").strip())
    refs = _git(repo, "for-each-ref", "--format=%(refname)").split()
    _git(repo, "update-ref", "--no-deref", "HEAD", sha)  # detach while refs go
    for ref in refs:
        _git(repo, "update-ref", "-d", ref)
    _git(repo, "update-ref", f"refs/heads/{BRANCH}", sha)
    _git(repo, "symbolic-ref", "HEAD", f"refs/heads/{BRANCH}")
    for section in _git(repo, "config", "--local", "--name-only", "--list").split():
        head = section.split(".")[0]
        if head in ("remote", "branch"):
            subprocess.run(  # a section may be gone already: not an error
                ["git", "config", "--local", "--remove-section", section.rsplit(".", 1)[0]],
                cwd=repo,
                env={**os.environ, **_ENV},
                capture_output=True,
                check=False,
            )
    for name in _STATE_FILES:
        (gitdir / name).unlink(missing_ok=True)
    for name in _STATE_DIRS:
        shutil.rmtree(gitdir / name, ignore_errors=True)
    alternates = gitdir / "objects" / "info" / "alternates"
    # -a -d: one pack of what is reachable (alternates' objects copied in), old packs gone
    _git(repo, "repack", "-a", "-d", "-f", "-q", "--no-write-bitmap-index")
    alternates.unlink(missing_ok=True)
    info = gitdir / "objects" / "info"
    for name in ("commit-graph", "commit-graphs", "packs", "multi-pack-index"):
        path = info / name
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
    (gitdir / "objects" / "pack" / "multi-pack-index").unlink(missing_ok=True)
    _git(repo, "prune", "--expire=now")
    _git(repo, "prune-packed")
    return sha


__all__ = ["GitCleanError", "reduce_to_base"]
