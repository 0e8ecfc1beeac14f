"""cgroup limits for one sandbox: memory (with swap), process count, CPU share.

The host's layout is found once (:func:`layout`); on cgroup v2 the work is done by
:mod:`.cgroup_v2` (one group per sandbox, under a subtree the backend owns), and the rest
of this docstring is about cgroup v1 (and hybrid hosts, whose controllers are all v1).

Each sandbox gets ``patchgym/<id>`` under the driver's own cgroup in each controller it
needs, so the driver's limits still bound it. Limits set here hold for root inside the
sandbox (it has no capabilities and no ``/sys``); rlimits would not. A requested limit
whose controller is missing or not writable is :class:`LimitUnavailable` at start; the
``pids`` controller is used whenever it exists, to find and kill every process of a
sandbox (``reap`` after a crashed driver).

The ``cpu`` controller is used whenever it is writable, with or without a CPU limit: every
sandbox then sits under one ``patchgym`` group, which the scheduler weighs as one entity
against the driver's own threads. Sixty-four sandboxes running test suites share that one
entity's CPU instead of outnumbering the driver 64 to 1, so its event loop keeps answering.
The entity weighs one default process per CPU (``cpu.shares`` 1024 × CPUs), so on a busy
host the sandboxes are not slowed to one process's share either.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from patchgym_sandbox.errors import LimitUnavailable
from patchgym_sandbox.local import cgroup_v2
from patchgym_sandbox.local.cgroup_layout import (
    CGROUP_ROOT,
    V1_SHARES_PER_CPU,
    Layout,
    layout,
    share_cpu,
)
from patchgym_sandbox.spec import Resources

__all__ = [
    "CGROUP_ROOT",
    "Layout",
    "add",
    "create",
    "enter",
    "layout",
    "parent_for",
    "pids",
    "remove",
    "sweep",
    "threads_movable",
]
CPU_PERIOD_US = 100_000
ALWAYS = ("cpu", "pids")
"""Joined whenever writable, limit or not: ``pids`` to find and kill, ``cpu`` for the
driver's share (see above)."""
CONTROLLERS = ("cpu", "memory", "pids")
"""Every controller a sandbox may have a group in (``ALWAYS`` plus the limits')."""
RMDIR_WAIT_S = 5.0
"""How long removal retries ``rmdir`` while the killed processes finish exiting (under
load a zombie keeps a group busy for a while); what is still busy then is left to
:func:`sweep`."""
KILL_WAIT_S = 1.0
"""How long removal keeps killing what is left in a v1 group before it tries ``rmdir``."""
ORPHAN_AGE_S = 600.0
"""An empty group older than this whose sandbox is gone is an orphan; younger ones may
belong to a sandbox being started (by any driver) that has not yet placed its init."""


def _own(controller: str) -> Path | None:
    """This process's cgroup directory in a v1 ``controller``, if mounted and writable."""
    mount = CGROUP_ROOT / controller
    if not (mount / "cgroup.procs").exists():
        return None
    rel = ""
    with contextlib.suppress(OSError):
        rel = _v1_paths("/proc/self/cgroup").get(controller, "")
    base = mount / rel
    return base if os.access(base, os.W_OK) else None


def _v1_paths(proc_file: str) -> dict[str, str]:
    """controller -> group path (no leading ``/``) from a ``/proc/.../cgroup`` file, whose
    v1 lines read ``id:controller[,controller...]:path``."""
    out: dict[str, str] = {}
    for line in Path(proc_file).read_text().splitlines():
        _, names, path = line.split(":", 2)
        for name in names.split(","):
            out[name] = path.lstrip("/")
    return out


def parent_for(controller: str) -> Path | None:
    """Where the sandboxes' groups that have ``controller`` go, if it is usable here."""
    lay = layout()
    if lay.version == "v2":
        return lay.parent if controller in lay.controllers else None
    base = _own(controller)
    return base / "patchgym" if base is not None else None


def _needed(res: Resources) -> dict[str, dict[str, str]]:
    """controller -> file -> value, in the order they must be written."""
    out: dict[str, dict[str, str]] = {}
    if res.memory_mb:
        b = str(res.memory_mb * 1024 * 1024)
        out["memory"] = {"memory.limit_in_bytes": b, "memory.memsw.limit_in_bytes": b}
    if res.pids:
        out["pids"] = {"pids.max": str(res.pids)}
    if res.cpus:
        out["cpu"] = {
            "cpu.cfs_period_us": str(CPU_PERIOD_US),
            "cpu.cfs_quota_us": str(int(res.cpus * CPU_PERIOD_US)),
        }
    return out


def create(sandbox_id: str, res: Resources) -> list[Path]:
    """Make the sandbox's cgroups and set its limits; returns their directories."""
    lay = layout()
    if lay.version == "v2":
        d = cgroup_v2.create(lay, sandbox_id, res)
        return [d] if d is not None else []
    if lay.version == "none" and _needed(res):
        raise LimitUnavailable(
            f"resources ask for limits ({', '.join(sorted(_needed(res)))}) but no cgroup "
            f"hierarchy is mounted at {CGROUP_ROOT}; mount cgroup2 there (mount -t cgroup2 "
            "none /sys/fs/cgroup), or drop those fields from resources"
        )
    made: list[Path] = []
    try:
        wanted = _needed(res)
        for controller in sorted({*wanted, *ALWAYS}):
            base = _own(controller)
            if base is None:
                if controller in wanted:
                    raise LimitUnavailable(
                        f"resources ask for a {controller} limit but the cgroup v1 '{controller}' "
                        f"controller is not mounted writable at {CGROUP_ROOT / controller}; "
                        f"mount it, or drop that field from resources"
                    )
                continue
            d = base / "patchgym" / sandbox_id
            d.mkdir(parents=True)
            made.append(d)
            if controller == "cpu":
                share_cpu(d.parent / "cpu.shares", V1_SHARES_PER_CPU, 262_144)
            for name, value in wanted.get(controller, {}).items():
                f = d / name
                if name == "memory.memsw.limit_in_bytes" and not f.exists():
                    continue  # no swap accounting: the memory limit alone holds
                try:
                    f.write_text(value)
                except OSError as exc:
                    raise LimitUnavailable(f"cannot set {f} = {value}: {exc}") from exc
    except BaseException:
        remove(made)
        raise
    return made


def add(dirs: list[Path], pid: int) -> None:
    for d in dirs:
        (d / "cgroup.procs").write_text(str(pid))


def threads_movable() -> bool:
    """Whether :func:`enter` works here: cgroup v1 places threads one by one (v2 only in
    threaded subtrees, which the sandboxes' limits cannot use)."""
    return layout().version != "v2"


def enter(dirs: list[Path]) -> list[Path]:
    """Move the calling thread alone into the groups (v1: ``0`` written to each ``tasks``);
    the processes it then forks start there. Returns the groups it was in, for the way
    back (``enter(returned)``), which must come before anything reads the groups'
    members (:func:`remove` would find the driver's PID in them).

    Writing a PID to ``cgroup.procs`` (:func:`add`) write-locks the kernel's global
    threadgroup lock, which waits for an RCU grace period: 7 to 160 ms measured here,
    more the busier the machine. Moving the calling thread itself skips that lock where
    the kernel knows to (this machine's 6.18 does): about 0.2 ms. Elsewhere it costs what
    :func:`add` costs. Fork-time allocations of a child (its copy of the driver's page
    tables, freed at its exec) are charged to the group the thread is in."""
    mine = _v1_paths("/proc/thread-self/cgroup")
    before = []
    for d in dirs:
        mount = d.relative_to(CGROUP_ROOT).parts[0]  # "cpu", or a joint "cpu,cpuacct"
        before.append(CGROUP_ROOT / mount / mine[mount.split(",")[0]])
    for d in dirs:
        (d / "tasks").write_text("0")
    return before


def pids(dirs: list[Path]) -> set[int]:
    found: set[int] = set()
    for d in dirs:
        with contextlib.suppress(OSError):
            found.update(int(x) for x in (d / "cgroup.procs").read_text().split())
    return found


def remove(dirs: list[Path]) -> None:
    """Kill whatever is still in the cgroups, then remove them."""
    v2 = [d for d in dirs if cgroup_v2.is_v2(d)]
    for d in v2:
        cgroup_v2.remove(d, RMDIR_WAIT_S)
    dirs = [d for d in dirs if d not in v2]
    pause = _backoff()
    deadline = time.monotonic() + KILL_WAIT_S
    while (left := pids(dirs) - {os.getpid()}) and time.monotonic() < deadline:
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(next(pause))
    pause = _backoff()
    deadline = time.monotonic() + RMDIR_WAIT_S
    for d in dirs:
        while True:
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    break
                time.sleep(next(pause))


def _backoff() -> Iterator[float]:
    """Pauses between looks at a group being emptied: v1 has no event to wait on, and a
    killed init usually leaves within a millisecond, so start short (0.5 ms), then double
    up to 10 ms."""
    pause = 0.0005
    while True:
        yield pause
        pause = min(pause * 2, 0.01)


def sweep(is_gone: Callable[[str], bool]) -> list[Path]:
    """Remove the empty ``patchgym/<id>`` groups, older than :data:`ORPHAN_AGE_S`, of
    sandboxes that ``is_gone`` (a removal that gave up on a busy group, a crash between
    making groups and writing the record). Groups with a process inside are never touched."""
    removed: list[Path] = []
    lay = layout()
    if lay.version == "v2":
        parents = {lay.parent} if lay.parent is not None else set()
    else:
        parents = {p for p in map(parent_for, CONTROLLERS) if p is not None}
    for parent in parents:
        if not parent.is_dir():
            continue
        for d in parent.iterdir():
            if not d.is_dir() or not is_gone(d.name) or pids([d]):
                continue
            with contextlib.suppress(OSError):
                if time.time() - d.stat().st_mtime > ORPHAN_AGE_S:
                    d.rmdir()
                    removed.append(d)
    return removed
