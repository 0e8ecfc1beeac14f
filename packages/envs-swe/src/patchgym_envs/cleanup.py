"""Closing every live ``SWEEnv`` when a script ends or is terminated.

A script that builds ``SWEEnv`` objects and is stopped by ``SIGTERM`` (a scheduler, a
``kill``) or exits without closing them would leak their sandboxes. The first env that
creates a sandbox installs, once per process: an ``atexit`` hook closing every env still
alive, and — only when ``SIGTERM`` still has its default action and this is the main
thread — a ``SIGTERM`` handler raising ``SystemExit(143)``, so ``finally`` blocks, context
managers and that hook run. An application that handles ``SIGTERM`` itself (the
``patchgym`` CLI does) keeps its own handler.
"""

from __future__ import annotations

import atexit
import logging
import signal
import threading
import weakref
from typing import Protocol

log = logging.getLogger(__name__)


class Closable(Protocol):
    def close(self) -> None: ...

    def close_now(self, timeout: float) -> None:
        """Close without waiting for the env's own lock (called from a signal handler)."""


_live: weakref.WeakSet[Closable] = weakref.WeakSet()
_lock = threading.Lock()
_atexit_done = False
_signal_done = False


def close_all() -> None:
    """Close every tracked env (errors are logged: the next one must still be closed)."""
    for env in list(_live):
        try:
            env.close()
        except Exception:
            log.exception("closing %r at exit failed", env)
        _live.discard(env)


def _on_sigterm(signum: int, frame: object) -> None:
    # Close first: at exit, Python joins worker threads (a running command's) before
    # atexit hooks run, so waiting for the hook could wait for the command itself.
    for env in list(_live):
        try:
            env.close_now(timeout=60)
        except Exception:
            log.exception("closing %r on SIGTERM failed", env)
        _live.discard(env)
    raise SystemExit(128 + signum)


def arm() -> None:
    """Install the exit hook once, and the SIGTERM handler once from the main thread."""
    global _atexit_done, _signal_done
    with _lock:
        if not _atexit_done:
            _atexit_done = True
            atexit.register(close_all)
        if _signal_done or threading.current_thread() is not threading.main_thread():
            return
        _signal_done = True
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)


def track(env: Closable) -> None:
    """Close ``env`` at interpreter exit or on ``SIGTERM`` unless it was closed before."""
    _live.add(env)
    arm()


def untrack(env: Closable) -> None:
    _live.discard(env)
