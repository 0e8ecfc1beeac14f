"""Find an interpreter for a spec's ``python`` (``major.minor``) without downloading one."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

from patchgym_envs.localbuild.errors import Unbuildable


def find_python(version: str) -> str:
    """Path of a local CPython ``version``: pyenv's versions, PATH, then ``uv python find``."""
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    for path in sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"), reverse=True):
        if os.access(path, os.X_OK):
            return path
    on_path = shutil.which(f"python{version}")
    if on_path:
        return os.path.realpath(on_path)
    done = subprocess.run(
        ["uv", "python", "find", "--no-python-downloads", version],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode == 0 and done.stdout.strip():
        return done.stdout.strip()
    raise Unbuildable(
        f"Python {version} is not installed here (pyenv install {version}, or give the spec "
        "another python in a specs file)"
    )


def prefix_of(python: str) -> str:
    """The installation prefix the interpreter needs at run time (bound read-only in sandboxes)."""
    done = subprocess.run(
        [python, "-c", "import sys; print(sys.base_prefix)"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()
