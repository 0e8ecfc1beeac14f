"""No future in .git: a template reduced to its base commit holds no later object.

The checks are the ones a policy would run to find the upstream fix: ``git log --all``,
``git rev-list --all --objects``, ``git cat-file --batch-all-objects --batch-check``,
``git fsck --unreachable``, tags, remotes, reflogs, stashes.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from patchgym_envs.bundled import bundled_task
from patchgym_envs.bundled.template import materialise
from patchgym_envs.gitclean import reduce_to_base
from patchgym_envs.localbuild.repos import RepoCache

ENV = {
    **os.environ,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t.invalid",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=repo,
        env=ENV,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def commit(repo: Path, name: str, text: str) -> str:
    (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"write {name}: {text.strip()}")
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def upstream(tmp_path: Path) -> tuple[Path, str, str]:
    """A repo whose future (a fix, a tag, a stash, a remote branch) is all in .git."""
    repo = tmp_path / "up"
    repo.mkdir()
    git(repo, "init", "-q")
    commit(repo, "lib.py", "def add(a, b):\n    return a - b\n")
    base = commit(repo, "README", "buggy\n")
    fix = commit(repo, "lib.py", "def add(a, b):\n    return a + b  # THE FIX\n")
    git(repo, "tag", "-a", "v2", "-m", "release with the fix")
    git(repo, "branch", "later")
    git(repo, "update-ref", "refs/remotes/origin/main", fix)
    git(repo, "update-ref", "refs/notes/commits", fix)
    git(repo, "gc", "-q")  # the fix sits in a pack
    git(repo, "checkout", "-q", base)
    (repo / "README").write_text("stashed\n")
    git(repo, "stash", "-q")
    (repo / ".git" / "FETCH_HEAD").write_text(f"{fix}\t\tbranch 'main'\n")
    return repo, base, fix


def reachable(repo: Path, base: str) -> set[str]:
    return {line.split()[0] for line in git(repo, "rev-list", "--objects", base).splitlines()}


def assert_only_base(repo: Path, base: str, fix: str) -> None:
    assert git(repo, "log", "--all", "--format=%H").split() == git(repo, "rev-list", base).split()
    assert "THE FIX" not in git(repo, "log", "--all", "-p")
    assert not git(repo, "log", "--all", "--grep", "THE FIX")
    listed = {line.split()[0] for line in git(repo, "rev-list", "--all", "--objects").splitlines()}
    assert listed == reachable(repo, base)
    stored = {
        line.split()[0]
        for line in git(repo, "cat-file", "--batch-all-objects", "--batch-check").splitlines()
    }
    assert stored == reachable(repo, base), stored - reachable(repo, base)
    assert fix not in stored
    assert git(repo, "fsck", "--unreachable", "--no-reflogs").strip() == ""
    assert git(repo, "tag") == "" and git(repo, "remote") == "" and git(repo, "stash", "list") == ""
    assert git(repo, "for-each-ref", "--format=%(refname)").split() == ["refs/heads/main"]
    assert git(repo, "reflog", "--all") == ""
    assert not (repo / ".git" / "FETCH_HEAD").exists()
    assert git(repo, "rev-parse", "HEAD").strip() == base


def test_reduce_to_base_leaves_no_future(upstream: tuple[Path, str, str]) -> None:
    repo, base, fix = upstream
    assert fix in git(repo, "log", "--all", "--format=%H")  # the attack works before
    assert reduce_to_base(repo, base) == base
    assert_only_base(repo, base, fix)
    assert (repo / "lib.py").read_text().endswith("a - b\n")  # working tree untouched
    assert git(repo, "status", "--porcelain") == ""


def test_localbuild_template_has_no_future(upstream: tuple[Path, str, str], tmp_path: Path) -> None:
    """``datasets build-local`` templates: a clone of a mirror holding every later commit."""
    repo, base, fix = upstream
    cache = RepoCache(tmp_path / "cache", {"o/up": str(repo)})
    template = cache.checkout("o/up", base, tmp_path / "templates" / "o__up-1")
    assert_only_base(template, base, fix)


def test_bundled_templates_have_only_their_base(tmp_path: Path) -> None:
    task = bundled_task("csvlite")
    template, base = materialise("csvlite", tmp_path)
    assert base == task.base_commit
    assert git(template, "rev-list", "--all").split() == [base]
    assert git(template, "fsck", "--unreachable", "--no-reflogs").strip() == ""
