"""Blocking work off the event loop, also while the interpreter exits.

At interpreter exit Python shuts every thread pool (``concurrent.futures`` refuses new
work once its exit hook ran) before ``atexit`` hooks run, so the hook that closes the
sandboxes a script left open could not reach a pool: ``asyncio.to_thread`` raised
"cannot schedule new futures after shutdown" and the sandbox's directory, mounts and
processes stayed. :func:`run_blocking` falls back to a thread of its own then.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")


async def run_blocking(
    fn: Callable[..., T], *args: Any, executor: Executor | None = None, **kwargs: Any
) -> T:
    """``loop.run_in_executor(executor, fn, ...)`` in a copy of the caller's context (as
    ``asyncio.to_thread`` runs it: tracing spans stay the caller's); when the pool refuses
    the work (it was shut down, as every pool is at interpreter exit), ``fn`` runs in a new
    daemon thread."""
    loop = asyncio.get_running_loop()
    call = partial(contextvars.copy_context().run, fn, *args, **kwargs)
    try:
        fut: asyncio.Future[T] = loop.run_in_executor(executor, call)
    except RuntimeError:  # "cannot schedule new futures after (interpreter) shutdown"
        fut = _in_own_thread(loop, call)
    return await fut


def _in_own_thread(loop: asyncio.AbstractEventLoop, call: Callable[[], T]) -> asyncio.Future[T]:
    fut: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, exc: BaseException | None) -> None:
        if fut.done():
            return
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        try:
            result = call()
        except BaseException as exc:
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=work, name="patchgym-offload", daemon=True).start()
    return fut
