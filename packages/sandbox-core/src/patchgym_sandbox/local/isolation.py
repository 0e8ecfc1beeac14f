"""bubblewrap argv for a sandbox: a minimal root, not the host's.

Inside: read-only ``/usr``, ``/bin``, ``/lib*``, ``/sbin`` (or their symlinks), a filtered
copy of ``/etc`` (only world-readable entries, never ``shadow``/``gshadow``/ssh keys), the
interpreter prefixes the tasks run (read-only, at their own paths), a fresh ``/proc``, a
minimal ``/dev``, the sandbox's private ``/tmp`` and its working copy at the workdir.
Nothing else of the host: no ``/run``, ``/var``, ``/root``, ``/home``, no host sockets, no
network unless asked. All namespaces unshared (the cgroup namespace too: the sandbox sees
its own cgroup as ``/``), root inside is an unprivileged uid outside
(:mod:`patchgym_sandbox.local.rootless`), every capability dropped, no new user
namespaces, ``no_new_privs`` (bubblewrap always sets it), the seccomp policy of
:mod:`patchgym_sandbox.seccomp`, the OCI runtime spec's masked and read-only ``/proc``
paths, and the sandbox dies with its driver.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from patchgym_sandbox.errors import IsolationUnavailable
from patchgym_sandbox.local import rootless, workcopy

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_NEVER = frozenset(
    {"shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "sudoers.d", "ssh", "docker",
     "kubernetes", "security", "credstore", "credstore.encrypted", "wireguard", "ssl/private"}
)  # fmt: skip
ETC_TMPFS_MB = 64
FIX = (
    "install bubblewrap (apt-get install bubblewrap) on a kernel with user and mount "
    "namespaces, or opt out explicitly (no security boundary): `sandbox.isolation=none` on "
    "the patchgym command line, `isolation: none` in a sandbox YAML"
)


@cache
def bwrap_path() -> str:
    """Path of a working ``bwrap``; raises :class:`IsolationUnavailable` naming the fix."""
    path = shutil.which("bwrap")
    if path is None:
        raise IsolationUnavailable(f"the local backend isolates with bubblewrap: {FIX}")
    hidden = rootless.staged_over(path)
    if hidden is not None:
        raise IsolationUnavailable(hidden)
    probe = subprocess.run(  # --as-pid-1: bubblewrap's own init would be left unreaped
        [path, "--unshare-all", "--unshare-user", "--uid", "0", "--gid", "0", "--cap-drop",
         "ALL", "--as-pid-1", *_system_binds(), "--proc", "/proc", "--dev", "/dev", "true"],
        capture_output=True,
        preexec_fn=rootless.become if os.geteuid() == 0 else None,
    )  # fmt: skip
    if probe.returncode != 0:
        raise IsolationUnavailable(
            "bubblewrap is installed but cannot create namespaces here "
            f"({probe.stderr.decode(errors='replace').strip()}): {FIX}"
        )
    return path


def interpreter_paths() -> list[Path]:
    """The running interpreter's installation and virtualenv (where tasks find python3),
    and every other environment whose site-packages is on its ``sys.path``: a layered
    environment (``uv run --with``) lists its base's in a ``.pth`` file, and the tasks'
    python must find the packages there as the driver does."""
    return list(_interpreter_paths())


@cache
def _interpreter_paths() -> tuple[Path, ...]:
    found: list[Path] = []
    prefixes = [
        Path(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
    ]
    layered = [_environment_of(Path(p)) for p in sys.path if p.endswith(_SITE_DIRS)]
    for p in [*prefixes, *layered]:
        for q in (p, p.resolve()):
            inside = any(q == f or f in q.parents for f in found)
            if not inside and q != Path("/") and not _under_system(q) and q.is_dir():
                found.append(q)
    return tuple(found)


_SITE_DIRS = ("site-packages", "dist-packages")


def _environment_of(site: Path) -> Path:
    """The virtual environment holding ``site`` (``<env>/lib/pythonX.Y/site-packages``), or
    the folder itself outside one."""
    env = site.parent.parent.parent
    return env if (env / "pyvenv.cfg").is_file() else site


def _under_system(p: Path) -> bool:
    return any(p == Path(d) or Path(d) in p.parents for d in SYSTEM_DIRS)


def _system_binds() -> list[str]:
    args: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    return args


def filtered_etc(dest: Path) -> Path:
    """Copy the world-readable part of /etc to a tmpfs mounted at ``dest`` (secrets are
    never world-readable; a tmpfs, so the sandbox's mount table names no host path)."""
    tmp = dest
    dest.mkdir(parents=True)
    if os.geteuid() == 0:
        workcopy.mount_tmpfs(dest, ETC_TMPFS_MB)
    for dirpath, dirnames, filenames in os.walk("/etc"):
        rel = os.path.relpath(dirpath, "/etc")
        out = tmp / rel if rel != "." else tmp
        keep = []
        for name in dirnames:
            rel_name = os.path.normpath(os.path.join(rel, name))
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISLNK(st.st_mode):
                filenames.append(name)  # copied as a link below
            elif rel_name not in ETC_NEVER and st.st_mode & 0o005 == 0o005:
                (out / name).mkdir()
                keep.append(name)
        dirnames[:] = keep
        for name in filenames:
            src = os.path.join(dirpath, name)
            rel_name = os.path.normpath(os.path.join(rel, name))
            if rel_name in ETC_NEVER:
                continue
            try:
                st = os.lstat(src)
                if stat.S_ISLNK(st.st_mode):
                    os.symlink(os.readlink(src), out / name)
                elif stat.S_ISREG(st.st_mode) and st.st_mode & 0o004:
                    shutil.copy2(src, out / name, follow_symlinks=False)
            except OSError:
                continue
    return dest


def remove_etc(etc: Path) -> None:
    workcopy.unmount(etc)
    shutil.rmtree(etc, ignore_errors=True)


MASKED = ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/timer_stats",
          "/proc/sched_debug", "/proc/latency_stats", "/proc/kallsyms", "/proc/kmsg")  # fmt: skip
"""The OCI runtime spec's masked files (and two more): unreadable inside."""
MASKED_DIRS = ("/proc/acpi", "/proc/scsi", "/proc/asound", "/proc/irq", "/proc/bus", "/proc/fs")
"""Masked by an empty read-only tmpfs (the spec masks the first three, makes the others
read-only: empty is stricter)."""
READONLY = ("/proc/sys", "/proc/sysrq-trigger")
"""Bound read-only over the sandbox's own /proc (their entries answer for the reader's
namespaces, so the values are the sandbox's)."""


def proc_defaults() -> list[str]:
    """bwrap arguments masking and write-protecting /proc as the OCI defaults do (only
    the entries this kernel has: a mount needs its target)."""
    args: list[str] = []
    for f in MASKED:
        if os.path.exists(f):
            args += ["--ro-bind", "/dev/null", f]  # nodev: even opening it fails
    for d in MASKED_DIRS:
        if os.path.isdir(d):
            args += ["--perms", "0555", "--tmpfs", d, "--remount-ro", d]
    for p in READONLY:
        if os.path.exists(p):
            args += ["--ro-bind", p, p]
    return args


def bwrap_argv(
    *,
    etc: Path,
    readonly: Sequence[tuple[Path, Path]],
    root: Path,
    workdir: str,
    tmp: Path,
    network: bool,
    info_fd: int,
    block_fd: int | None,
    seccomp_fd: int,
) -> list[str]:
    """argv up to (excluding) the command; the command runs as PID 1 of its namespace.

    bubblewrap runs as the unprivileged :data:`~patchgym_sandbox.local.rootless.SANDBOX_UID`
    (see :mod:`patchgym_sandbox.local.rootless`) and maps it to uid 0 in a new user
    namespace. ``readonly`` is ``(staged source, path inside)``: host paths the driver bound
    where that uid can reach them, bound read-only at their own paths."""
    argv = [
        bwrap_path(),
        "--unshare-all",
        "--unshare-user",
        "--uid",
        "0",
        "--gid",
        "0",
        "--disable-userns",
        "--cap-drop",
        "ALL",
    ]
    if network:
        argv.append("--share-net")
    argv += ["--die-with-parent", "--new-session", "--as-pid-1"]
    argv += ["--info-fd", str(info_fd)]
    if block_fd is not None:  # the driver places the init in its cgroups first
        argv += ["--block-fd", str(block_fd)]
    argv += _system_binds()
    argv += ["--ro-bind", str(etc), "/etc"]
    argv += ["--proc", "/proc", *proc_defaults(), "--dev", "/dev", "--bind", str(tmp), "/tmp"]
    # after /tmp: a prefix or a task env under the host's /tmp must not be hidden by it
    for staged, inside in readonly:
        argv += ["--ro-bind", str(staged), str(inside)]
    argv += ["--bind", str(root), workdir, "--remount-ro", "/", "--chdir", workdir]
    argv += ["--seccomp", str(seccomp_fd)]
    return argv
