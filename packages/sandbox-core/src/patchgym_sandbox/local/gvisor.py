"""gVisor (``runsc``) argv and OCI bundle for a sandbox: ``isolation: gvisor``.

The same sandbox as :mod:`patchgym_sandbox.local.isolation` builds with bubblewrap (the
minimal root, the filtered ``/etc``, the interpreter prefixes read-only, the private
``/tmp``, the working copy at the workdir, the exec server as PID 1), but the commands run
on gVisor's user-space kernel (the Sentry) instead of this machine's: every system call a
command makes is answered by the Sentry, which itself runs under a tight seccomp filter,
so a kernel bug reachable from a sandbox's system calls is not a host kernel bug. Files
reach it through gVisor's gofer (9p), which runs as the sandbox's unprivileged host uid
(``runsc --rootless`` started as :data:`~patchgym_sandbox.local.rootless.SANDBOX_UID`).

The policy of :mod:`patchgym_sandbox.seccomp` is loaded inside as the bundle's OCI seccomp
profile (``--oci-seccomp``). Limits stay cgroups of this machine around the ``runsc``
processes (``--ignore-cgroups``: runsc makes none of its own); the Sentry's memory is one
host process, so the memory limit ends the whole sandbox where bubblewrap ends one command.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from patchgym_sandbox import seccomp
from patchgym_sandbox.errors import IsolationUnavailable
from patchgym_sandbox.local import rootless
from patchgym_sandbox.local.bootcode import trusted
from patchgym_sandbox.local.isolation import SYSTEM_DIRS

FIX = (
    "install gVisor (apt-get install runsc) on a kernel that lets an unprivileged user make "
    "user namespaces, or choose `isolation: bwrap`"
)


def _flags(state: Path) -> list[str]:
    return ["--rootless", "--ignore-cgroups", f"--root={state}"]


@cache
def runsc_path() -> str:
    """Path of a working ``runsc``; raises :class:`IsolationUnavailable` naming the fix."""
    path = shutil.which("runsc")
    if path is None:
        raise IsolationUnavailable(f"isolation: gvisor runs sandboxes under runsc: {FIX}")
    hidden = rootless.staged_over(path)
    if hidden is not None:
        raise IsolationUnavailable(hidden)
    with tempfile.TemporaryDirectory(prefix="patchgym-runsc-") as tmp:
        uid = rootless.SANDBOX_UID if os.geteuid() == 0 else None
        if uid is not None:
            os.chown(tmp, uid, uid)
        probe = subprocess.run(
            reaped(-1, [path, *_flags(Path(tmp) / "state"), "--network=none", "do", "true"], uid),
            capture_output=True,
            env={"PATH": "/usr/bin:/bin", "TMPDIR": tmp, "HOME": tmp},
            preexec_fn=(lambda: rootless.become(uid)) if uid is not None else None,
            timeout=60,
        )
    if probe.returncode != 0:
        raise IsolationUnavailable(
            "runsc is installed but cannot start a sandbox here "
            f"({probe.stderr.decode(errors='replace').strip()[-500:]}): {FIX}"
        )
    return path


def _profile() -> dict[str, Any]:
    """:func:`patchgym_sandbox.seccomp.docker_profile` less its ``clone3`` rule: runsc's
    OCI seccomp answers every rule with EPERM (``errnoRet`` is not honoured), and glibc
    falls back from ``clone3`` to ``clone`` only on ENOSYS, which is what this Sentry
    answers for ``clone3`` itself (every thread start failed with the rule in)."""
    profile = seccomp.docker_profile()
    profile["syscalls"] = [r for r in profile["syscalls"] if r["names"] != ["clone3"]]
    return profile


def _bind(source: Path | str, dest: str, *, ro: bool) -> dict[str, Any]:
    return {"destination": dest, "type": "bind", "source": str(source),
            "options": ["rbind", "ro" if ro else "rw", "nosuid", "nodev"]}  # fmt: skip


def spec(
    *,
    argv: Sequence[str],
    env: Mapping[str, str],
    etc: Path,
    readonly: Sequence[tuple[Path, Path]],
    root: Path,
    workdir: str,
    tmp: Path,
) -> dict[str, Any]:
    """The bundle's ``config.json``: an empty read-only root with the sandbox's mounts."""
    mounts: list[dict[str, Any]] = [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs"},
    ]
    for d in SYSTEM_DIRS:
        if os.path.isdir(d):  # a link (/bin -> usr/bin) is bound as the directory it names
            mounts.append(_bind(os.path.realpath(d), d, ro=True))
    mounts.append(_bind(etc, "/etc", ro=True))
    mounts.append(_bind(tmp, "/tmp", ro=False))
    mounts += [_bind(staged, str(inside), ro=True) for staged, inside in readonly]
    mounts.append(_bind(root, workdir, ro=False))
    no_caps: dict[str, list[str]] = {
        k: [] for k in ("bounding", "effective", "permitted", "inheritable", "ambient")
    }
    return {
        "ociVersion": "1.0.2",
        "process": {
            "user": {"uid": 0, "gid": 0},
            "args": list(argv),
            "env": [f"{k}={v}" for k, v in env.items()],
            "cwd": workdir,
            "noNewPrivileges": True,
            "capabilities": no_caps,
        },
        "root": {"path": "rootfs", "readonly": True},
        "hostname": "sandbox",
        "mounts": mounts,
        "linux": {
            "namespaces": [{"type": t} for t in ("pid", "mount", "ipc", "uts", "network")],
            "seccomp": _profile(),
            "maskedPaths": list(seccomp.MASKED_PATHS),
            "readonlyPaths": list(seccomp.READONLY_PATHS),
        },
    }


def write_bundle(bundle: Path, config: Mapping[str, Any], uid: int | None) -> None:
    """``bundle/config.json``, the empty ``rootfs`` and runsc's ``state`` directory (owned
    by ``uid``, who runs runsc)."""
    for d in (bundle, bundle / "rootfs", bundle / "state"):
        d.mkdir()
        if uid is not None:
            rootless.own(d, uid)
    (bundle / "config.json").write_text(json.dumps(config))


REAPER = """\
import ctypes, os, sys
prctl = ctypes.CDLL(None).prctl
prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: runsc's orphaned helpers come here
info = int(sys.argv[1])
pid = os.fork()
if pid == 0:
    if info >= 0:
        os.close(info)
    prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL: runsc dies with this reaper
    os.execv(sys.argv[2], sys.argv[2:])
if info >= 0:
    os.write(info, b'{"child-pid": %d}' % pid)
    os.close(info)
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)  # the server's pipes stay runsc's alone: the driver sees EOF when it ends
os.dup2(null, 1)
code = 1
while True:
    try:
        done, status = os.waitpid(-1, 0)
    except ChildProcessError:
        break
    except InterruptedError:
        continue
    if done == pid:
        code = os.waitstatus_to_exitcode(status)
os._exit(code if code >= 0 else 128 - code)
"""
"""``python -I -S -c REAPER <info fd or -1> <argv...>``: runs ``argv`` (runsc) as its
child and reaps it and every process that leaves behind, then exits with ``argv``'s status.
runsc re-executes itself and forks helpers (the Sentry, the gofer, short-lived ``exe``
processes) that outlive their parents: without a reaper of its own each one ends as a zombie
of this machine's PID 1, or of a trainer that is its container's PID 1 and reaps nothing,
about seven per sandbox, until the container runs out of PIDs. It answers the launcher's
``--info-fd`` as bubblewrap would (see :func:`patchgym_sandbox.local.server.launch`) with
runsc's PID, the one a close kills; runsc has no ``--block-fd``: the child placed itself in
the cgroups before exec, so there is nothing to wait for. The reaper itself has no
parent-death signal, as runsc had none before it: such a signal fires when the driver's
*thread* that started it ends (a pool thread, here), not the driver."""


REAPER_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")
"""Tried before the driver's own interpreter, which may sit where only root may enter
(pyenv's under ``/root``). Each must be :func:`~.bootcode.trusted` (what starts runsc must
not be a file anyone else could have replaced) and runnable by any user."""


def reaped(info_fd: int, argv: Sequence[str], uid: int | None) -> list[str]:
    """``argv`` under :data:`REAPER`, on an interpreter that ``uid`` (None: this process's
    user) may run."""
    return [reaper_python(uid), "-I", "-S", "-c", REAPER, str(info_fd), *argv]


@cache
def reaper_python(uid: int | None) -> str:
    driver = os.path.realpath(sys.executable)
    if uid is None:
        return driver
    for candidate in (*map(os.path.realpath, REAPER_PYTHONS), driver):
        if os.path.isfile(candidate) and trusted(candidate) and _anyone_runs(Path(candidate)):
            return candidate
    raise IsolationUnavailable(
        f"isolation: gvisor runs runsc as uid {uid} under a Python reaper, and no Python "
        f"here is one that uid may run (tried {', '.join(REAPER_PYTHONS)} and {driver}): "
        "install python3 from the system's packages"
    )


def _anyone_runs(path: Path) -> bool:
    """Every folder above ``path`` may be entered, and ``path`` run, by any user."""
    return all(os.stat(p).st_mode & 0o001 for p in (path, *path.parents))


def runsc_argv(*, bundle: Path, sandbox_id: str) -> list[str]:
    """``runsc run`` of the bundle, attached: the Sentry and the gofer die with it."""
    return [
        runsc_path(), *_flags(bundle / "state"), "--network=none", "--oci-seccomp",
        "run", "--bundle", str(bundle), sandbox_id,
    ]  # fmt: skip
