"""Run code in a short-lived thread of its own, for kernel state that is per thread.

A thread may change its own working directory (after ``unshare(CLONE_FS)``), mount
namespace (``unshare(CLONE_NEWNS)``) or cgroup v1 membership (``tasks``) without touching
the driver's other threads, and whatever it starts inherits that state. A pool thread must
never do it (the next task would find the state changed): each call gets a fresh thread.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractContextManager
from typing import TypeVar

T = TypeVar("T")


def in_own_thread(fn: Callable[[], T], name: str) -> T:
    """``fn()`` in a new thread, waited for; its result, or its exception re-raised here."""
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(fn())
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=run, name=name)
    worker.start()
    worker.join()
    if failure:
        raise failure[0]
    return result[0]


def spawn_in_own_thread(
    around: Callable[[], AbstractContextManager[object]],
    spawn: Callable[[], subprocess.Popen[bytes]],
    name: str,
) -> subprocess.Popen[bytes]:
    """``spawn()`` inside ``around()``, in a new thread that then waits for the child until
    it exits: a child's parent-death signal (bubblewrap's ``--die-with-parent``) fires when
    the *thread* that forked it ends, so that thread lives as long as the child. A failure
    of ``around``'s exit kills the child it started; either failure is raised here."""
    started: Future[subprocess.Popen[bytes]] = Future()

    def run() -> None:
        proc = None
        try:
            with around():
                proc = spawn()
        except BaseException as exc:
            if proc is not None:
                proc.kill()
                proc.wait()
            started.set_exception(exc)
            return
        started.set_result(proc)
        proc.wait()

    threading.Thread(target=run, name=name, daemon=True).start()
    return started.result()
