"""Client-side limits on sandbox creation: at most N in flight and R started per second."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from patchgym_sandbox.admission import TokenBucket


class CreateLimiter:
    """A semaphore (concurrent creates) plus a token bucket (creates per second, burst 1 s)."""

    def __init__(self, max_concurrent: int, per_second: float) -> None:
        self._sem = asyncio.Semaphore(max_concurrent)
        self._bucket = TokenBucket(per_second, max(1, math.ceil(per_second)))

    async def _take(self) -> None:
        delay = self._bucket.take()
        if delay > 0:
            await asyncio.sleep(delay)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a create slot; every attempt (retries included) passes the bucket."""
        async with self._sem:
            await self._take()
            yield

    async def pace(self) -> None:
        """Take one more token for a retry while already holding the slot."""
        await self._take()
