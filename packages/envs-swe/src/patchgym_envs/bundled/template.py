"""Materialise a bundled task's repository as a git repo (the local backend's template).

The sources ship as package data; at first use they are copied into a cache folder and
committed with fixed author, committer and dates, so the base commit's hash depends only
on the file contents (and is the ``base_commit`` of the task). Building happens in a
temporary sibling folder that is renamed into place, so concurrent first uses are safe.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from patchgym_envs.gitclean import reduce_to_base

GITIGNORE = "__pycache__/\n*.pyc\n.pytest_cache/\n"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "patchgym",
    "GIT_AUTHOR_EMAIL": "tasks@patchgym.invalid",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+00:00",
    "GIT_COMMITTER_NAME": "patchgym",
    "GIT_COMMITTER_EMAIL": "tasks@patchgym.invalid",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+00:00",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}
_SKIP = ("__pycache__", ".pytest_cache")


def tasks_root() -> Traversable:
    return resources.files("patchgym_envs.bundled").joinpath("tasks")


def cache_home() -> Path:
    """``$PATCHGYM_CACHE_DIR`` or ``~/.cache/patchgym``: everything patchgym builds and reuses."""
    base = os.environ.get("PATCHGYM_CACHE_DIR")
    if base:
        return Path(base)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "patchgym"


def cache_root() -> Path:
    """``<cache_home>/bundled``: materialised bundled templates."""
    return cache_home() / "bundled"


def source_files(name: str) -> dict[str, bytes]:
    """Relative path -> content of the task's base sources (plus the .gitignore)."""
    out: dict[str, bytes] = {".gitignore": GITIGNORE.encode()}

    def walk(node: Traversable, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.name in _SKIP or child.name.endswith(".pyc"):
                continue
            rel = f"{prefix}{child.name}"
            if child.is_dir():
                walk(child, rel + "/")
            else:
                out[rel] = child.read_bytes()

    walk(tasks_root().joinpath(name, "repo"), "")
    return out


def digest(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + hashlib.sha256(files[rel]).digest())
    return h.hexdigest()


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    try:
        done = subprocess.run(
            [
                "git",
                "-c",
                "init.defaultBranch=main",
                "-c",
                "commit.gpgsign=false",
                "-c",
                "core.autocrlf=false",
                *args,
            ],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        if shutil.which("git") is not None:
            raise
        from patchgym_envs.errors import SetupFailed

        raise SetupFailed(
            "git is not installed (the bundled tasks are git repositories): apt-get install git"
        ) from None
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {done.stderr.strip()}")
    return done.stdout.strip()


_built: dict[tuple[str, Path], tuple[Path, str]] = {}
"""(task, cache root) -> (template folder, base commit) already built or checked by this
process: an episode's sandbox start asks for its template, and reading the sources, hashing
them and asking git for HEAD every time would block the event loop under many episodes."""


def materialise(name: str, cache_dir: Path | None = None) -> tuple[Path, str]:
    """The template folder of bundled task ``name`` and its base commit (built once)."""
    root = cache_dir if cache_dir is not None else cache_root()
    known = _built.get((name, root))
    if known is not None and (known[0] / ".git").is_dir():
        return known
    files = source_files(name)
    target = root / f"{name}-{digest(files)[:16]}"
    if not (target / ".git").is_dir():
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
        try:
            for rel, data in files.items():
                path = tmp / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                path.chmod(0o644)
            _git(tmp, "init", "-q")
            _git(tmp, "add", "-A")
            _git(tmp, "commit", "-q", "-m", f"{name}: base commit")
            reduce_to_base(tmp)  # a single commit already; kept so every template is reduced
            try:
                tmp.rename(target)
            except OSError:  # someone else finished first
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    _built[(name, root)] = (target, _git(target, "rev-parse", "HEAD"))
    return _built[(name, root)]
