"""Which cgroup layout this host has, found once per process, and the v2 subtree we own.

* ``v2`` — ``/sys/fs/cgroup`` is the unified (cgroup2) mount (Ubuntu 22.04+, Debian 12 with
  systemd, RHEL 9, current Kubernetes nodes). Sandboxes get ``<parent>/<id>``, where the
  parent is a subtree the backend owns: ``PATCHGYM_CGROUP_PARENT`` when set (a delegated
  group with no processes of its own), else ``patchgym`` under the driver's own group when
  that is the root of the hierarchy, else ``patchgym`` at the root when it is writable (as
  root on a host: v2's "no internal processes" rule forbids enabling controllers for
  children of a group that holds processes, the driver's own included; only the root is
  exempt). ``memory``, ``pids`` and ``cpu`` are enabled in ``cgroup.subtree_control`` on
  the way down; the ``patchgym`` group itself never holds a process.
* ``v1`` — one hierarchy per controller (``/sys/fs/cgroup/<controller>``), possibly with an
  empty v2 beside it at ``/sys/fs/cgroup/unified`` (hybrid): see :mod:`.cgroups`.
* ``none`` — no cgroup mount at all: a limit asked for is :class:`LimitUnavailable`.
"""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Literal

CGROUP_ROOT = Path("/sys/fs/cgroup")
PARENT_ENV = "PATCHGYM_CGROUP_PARENT"
V2_CONTROLLERS = ("cpu", "memory", "pids")


@dataclass(frozen=True)
class Layout:
    version: Literal["v1", "v2", "none"]
    root: Path = CGROUP_ROOT
    parent: Path | None = None
    """v2: the subtree the backend owns (None: it could not be set up, see ``problem``)."""
    controllers: frozenset[str] = field(default_factory=frozenset)
    """v2: the controllers enabled for the sandboxes' groups."""
    problem: str | None = None
    """v2: why the subtree or a controller is missing, with the fix on this host."""
    hybrid: bool = False
    """v1: an empty v2 hierarchy is mounted beside the v1 controllers."""

    def describe(self) -> str:
        if self.version == "v1":
            return "cgroup v1" + (
                " (hybrid: v2 mounted without controllers)" if self.hybrid else ""
            )
        if self.version == "none":
            return f"no cgroup hierarchy mounted at {self.root}"
        if self.parent is None:
            return f"cgroup v2, unusable: {self.problem}"
        names = ",".join(sorted(self.controllers)) or "none"
        out = f"cgroup v2, sandboxes under {self.parent} (controllers: {names})"
        return out + (f"; {self.problem}" if self.problem else "")


def _mounts() -> dict[str, str]:
    """mount point -> filesystem type, from this process's mount namespace."""
    out: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            out[left.split()[4]] = right.split()[0]
    return out


def own_v2_group() -> str:
    """This process's path in the unified hierarchy (``0::<path>``), ``/`` if unknown."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return line[3:] or "/"
    return "/"


def _enable(group: Path, controllers: set[str]) -> str | None:
    """Enable ``controllers`` for ``group``'s children; the first failure, or None."""
    have = set((group / "cgroup.subtree_control").read_text().split())
    for name in sorted(controllers - have):
        try:
            (group / "cgroup.subtree_control").write_text(f"+{name}")
        except OSError as exc:
            why = exc.strerror
            if exc.errno == errno.EBUSY:
                why = (
                    "it holds processes, and v2 enables controllers only for groups without "
                    f"any: move them into a child group, or set {PARENT_ENV}"
                )
            return f"cannot enable '{name}' in {group}/cgroup.subtree_control ({why})"
    return None


V1_SHARES_PER_CPU = 1024
V2_WEIGHT_PER_CPU = 100
"""The sandboxes' parent group weighs as much as one default-weight process per CPU (v1
``cpu.shares`` 1024 and v2 ``cpu.weight`` 100 are one such process). With the default weight
alone, every sandbox of the machine would share one process's worth of CPU against the
rest of a busy host (a 2-3x slower test run under load); per CPU, they compete like the
commands they are while the driver's threads still keep a fair share."""


def share_cpu(file: Path, per_cpu: int, most: int) -> None:
    """Set a parent group's CPU weight to ``per_cpu`` × this machine's CPUs (best effort)."""
    with contextlib.suppress(OSError):
        file.write_text(str(min(most, per_cpu * (os.cpu_count() or 1))))


def setup_v2(root: Path, own: str, override: str | None) -> Layout:
    """Find or make the subtree sandboxes go under; never raises (the problem is kept)."""
    if override:
        parent = Path(override)
        if not (parent / "cgroup.procs").exists() or not os.access(parent, os.W_OK):
            return Layout(
                "v2", root, problem=f"{PARENT_ENV}={override} is not a writable cgroup v2 group"
            )
        chain = [parent]
    elif os.access(root, os.W_OK):
        parent = root / "patchgym"
        chain = [root, parent]
    else:
        return Layout(
            "v2",
            root,
            problem=(
                f"the driver's cgroup {own} holds processes and {root} is not writable; run it "
                f"as root on the host, or set {PARENT_ENV} to a delegated group with no "
                "processes (e.g. a subgroup of a systemd unit with Delegate=yes)"
            ),
        )
    try:
        parent.mkdir(exist_ok=True)
    except OSError as exc:
        return Layout("v2", root, problem=f"cannot create {parent}: {exc.strerror}")
    available = set((chain[0] / "cgroup.controllers").read_text().split())
    wanted = set(V2_CONTROLLERS) & available
    problem = None
    for group in chain:
        problem = problem or _enable(group, wanted)
    enabled = frozenset(V2_CONTROLLERS) & set(
        (parent / "cgroup.subtree_control").read_text().split()
    )
    if "cpu" in enabled and parent != root:
        share_cpu(parent / "cpu.weight", V2_WEIGHT_PER_CPU, 10_000)
    missing = sorted(set(V2_CONTROLLERS) - enabled)
    if missing and problem is None:
        problem = f"controllers {', '.join(missing)} are not available in {chain[0]}"
    return Layout("v2", root, parent, enabled, problem)


@cache
def layout() -> Layout:
    """The host's layout (v2: its subtree set up); found once per process."""
    mounts = _mounts()
    kind = mounts.get(str(CGROUP_ROOT))
    if kind == "cgroup2":
        return setup_v2(CGROUP_ROOT, own_v2_group(), os.environ.get(PARENT_ENV))
    v1 = any(t == "cgroup" for p, t in mounts.items() if p.startswith(f"{CGROUP_ROOT}/"))
    if v1:
        return Layout("v1", hybrid=mounts.get(str(CGROUP_ROOT / "unified")) == "cgroup2")
    return Layout("none")
