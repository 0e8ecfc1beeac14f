"""Admission control: hard caps on sandboxes starting at once and on the creation rate.

Cloud providers throttle creation and clusters fall over when thousands of sandboxes start
together, so every start (plain, pooled, grouped or forked: all go through
``Sandbox.start``) first passes its backend's :class:`Admission`:

- ``max_starting``: at most this many ``start()`` calls provisioning at once;
- ``creates_per_s`` (with ``creates_burst``): a token bucket on the rate of creations.

Both come from the backend config (``sandbox.max_starting=8 sandbox.creates_per_s=2``),
off by default. The limits hold per backend object; to hold them across every worker of a
run, give each worker's backend the same shared admission (:meth:`SandboxBackend.admit_with`;
the trainer's Ray executor does this with one named actor). The seconds a start waited are
kept on the sandbox (``Sandbox.admission_wait_s``) and reported as the ``admission`` phase.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol, runtime_checkable


@runtime_checkable
class Admission(Protocol):
    """What ``Sandbox.start`` asks before provisioning: wait for a slot, give it back."""

    async def acquire(self) -> float:
        """Wait until a start may begin; return the seconds waited."""
        ...

    async def release(self) -> None:
        """The start that acquired has finished (started or failed)."""
        ...


@asynccontextmanager
async def admitted(admission: Admission | None) -> AsyncIterator[float]:
    """Hold a start slot for the block; yields the seconds waited (0 without admission)."""
    if admission is None:
        yield 0.0
        return
    waited = await admission.acquire()
    try:
        yield waited
    finally:
        await admission.release()


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` saved up; ``take`` says how long to wait."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = float(burst)
        self._tokens = float(burst)
        self._at = time.monotonic()

    def take(self, now: float | None = None) -> float:
        """Reserve one token; the seconds until it is due (0 if one is there now)."""
        now = time.monotonic() if now is None else now
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate


class LocalAdmission:
    """Both caps for the starts of one process (one event loop at a time)."""

    def __init__(
        self,
        max_starting: int | None = None,
        creates_per_s: float | None = None,
        creates_burst: int | None = None,
    ) -> None:
        self.max_starting = max_starting
        self.bucket = (
            TokenBucket(creates_per_s, creates_burst or max(1, math.ceil(creates_per_s)))
            if creates_per_s
            else None
        )
        self.in_flight = 0
        self.high_water = 0
        self.waited_s = 0.0
        self._cond: asyncio.Condition | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _condition(self) -> asyncio.Condition:
        loop = asyncio.get_running_loop()
        if self._cond is None or self._loop is not loop:
            # a backend used from a new event loop (the sync facade) starts a fresh gate;
            # starts still running on a dead loop cannot be waited on anyway
            self._cond, self._loop, self.in_flight = asyncio.Condition(), loop, 0
        return self._cond

    async def acquire(self) -> float:
        t0 = time.monotonic()
        cond = self._condition()
        if self.max_starting is not None:
            async with cond:
                limit = self.max_starting
                await cond.wait_for(lambda: self.in_flight < limit)
                self.in_flight += 1
        else:
            self.in_flight += 1
        self.high_water = max(self.high_water, self.in_flight)
        if self.bucket is not None:
            delay = self.bucket.take()
            if delay > 0:
                try:
                    await asyncio.sleep(delay)
                except BaseException:
                    await self.release()
                    raise
        waited = time.monotonic() - t0
        self.waited_s += waited
        return waited

    async def release(self) -> None:
        cond = self._condition()
        async with cond:
            self.in_flight = max(0, self.in_flight - 1)
            cond.notify()
