"""Waiting on a condition with a deadline, for tests that must hold on a busy machine.

A fixed sleep before an assertion decides the outcome by timing; :func:`eventually` polls
the condition until it holds or a generous deadline passes, so a loaded machine only makes
the test slower, never red.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

DEADLINE_S = 60.0


async def eventually(
    check: Callable[[], bool | Awaitable[bool]], within_s: float = DEADLINE_S, every_s: float = 0.1
) -> bool:
    """True as soon as ``check()`` (sync or async) is true; False once ``within_s`` passed."""
    deadline = time.monotonic() + within_s
    while True:
        got = check()
        if inspect.isawaitable(got):
            got = await got
        if got:
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(every_s)


def eventually_sync(
    check: Callable[[], bool], within_s: float = DEADLINE_S, every_s: float = 0.05
) -> bool:
    """:func:`eventually` for code without an event loop."""
    deadline = time.monotonic() + within_s
    while not check():
        if time.monotonic() >= deadline:
            return False
        time.sleep(every_s)
    return True
