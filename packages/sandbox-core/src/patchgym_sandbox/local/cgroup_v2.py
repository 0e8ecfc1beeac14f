"""cgroup v2 groups for one sandbox: limits, kill, and removal once empty.

One group per sandbox, ``<parent>/<id>`` (see :mod:`.cgroup_layout`): ``memory.max`` with
``memory.swap.max = 0``, ``pids.max``, ``cpu.max``. Killing writes ``cgroup.kill`` (Linux
5.14+; older kernels: freeze, SIGKILL each process, thaw), then removal waits for
``cgroup.events`` to say ``populated 0`` — the kernel notifies that file, so the wait is a
``poll`` on it, not a loop of reads — and removes the group.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from pathlib import Path

from patchgym_sandbox.errors import LimitUnavailable
from patchgym_sandbox.local.cgroup_layout import Layout
from patchgym_sandbox.spec import Resources

CPU_PERIOD_US = 100_000


def needed(res: Resources) -> dict[str, dict[str, str]]:
    """controller -> file -> value."""
    out: dict[str, dict[str, str]] = {}
    if res.memory_mb:
        out["memory"] = {"memory.max": str(res.memory_mb * 1024 * 1024), "memory.swap.max": "0"}
    if res.pids:
        out["pids"] = {"pids.max": str(res.pids)}
    if res.cpus:
        out["cpu"] = {"cpu.max": f"{int(res.cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}"}
    return out


def _unavailable(lay: Layout, controller: str) -> LimitUnavailable:
    where = lay.parent or lay.root / "patchgym"
    fix = (
        f"enable it (echo +{controller} > {lay.root}/cgroup.subtree_control, and in each "
        f"group down to {where})"
    )
    return LimitUnavailable(
        f"resources ask for a {controller} limit but the cgroup v2 '{controller}' controller "
        f"is not enabled for {where} ({lay.problem or 'not enabled'}); {fix}, or drop that "
        "field from resources"
    )


def create(lay: Layout, sandbox_id: str, res: Resources) -> Path | None:
    """The sandbox's group with its limits set; None when there is no subtree and no limit
    was asked for (processes are then found by token)."""
    wanted = needed(res)
    for controller in wanted:
        if controller not in lay.controllers:
            raise _unavailable(lay, controller)
    if lay.parent is None:
        return None
    d = lay.parent / sandbox_id
    d.mkdir()
    try:
        for files in wanted.values():
            for name, value in files.items():
                f = d / name
                if name == "memory.swap.max" and not f.exists():
                    continue  # no swap accounting (swapaccount=0): memory.max alone holds
                try:
                    f.write_text(value)
                except OSError as exc:
                    raise LimitUnavailable(f"cannot set {f} = {value}: {exc}") from exc
    except BaseException:
        d.rmdir()
        raise
    return d


def is_v2(d: Path) -> bool:
    return (d / "cgroup.events").exists()


def kill(d: Path) -> None:
    """SIGKILL every process in the group (and any group beneath it)."""
    with contextlib.suppress(FileNotFoundError):
        if (d / "cgroup.kill").exists():
            (d / "cgroup.kill").write_text("1")
            return
        freeze = d / "cgroup.freeze"
        freeze.write_text("1")  # nothing forks while we look
        try:
            for pid in (d / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGKILL)
        finally:
            freeze.write_text("0")


def wait_empty(d: Path, timeout: float) -> bool:
    """Wait until ``cgroup.events`` says ``populated 0``; False on timeout."""
    try:
        fd = os.open(d / "cgroup.events", os.O_RDONLY)
    except FileNotFoundError:
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLPRI | select.POLLERR)
        deadline = time.monotonic() + timeout
        while True:
            os.lseek(fd, 0, os.SEEK_SET)
            if b"populated 0" in os.read(fd, 4096):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            poller.poll(left * 1000)
    finally:
        os.close(fd)


def remove(d: Path, timeout: float) -> None:
    """Kill what is inside, wait until empty, remove; a group still busy at ``timeout`` is
    left for ``sweep``."""
    kill(d)
    if not wait_empty(d, timeout):
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)  # emptied, not yet released (rare): a short bounded retry
