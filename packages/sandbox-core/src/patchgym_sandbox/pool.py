"""Warm pools and groups: started sandboxes ready before a rollout asks for one.

Works over any backend's ``sandbox(spec)`` / ``start()``; a backend with a cheaper way to
make n identical sandboxes overrides :meth:`SandboxBackend.create_group`.

- :func:`start_group` starts ``n`` sandboxes of one spec at once; all or nothing (a failed
  start closes the others and re-raises the first error).
- :class:`SandboxPool` keeps ``size`` started sandboxes of one spec ready; :meth:`claim`
  hands one out at once (or starts one cold when the pool is empty) and refills in the
  background; a member counts as ready once it has run a first command (some backends
  finish booting in the background after ``start``). A member is created with the lease ``max_idle_s + spec.lease_s`` and is
  recycled (closed and replaced) once it has idled ``max_idle_s``, so a claimed sandbox
  always has at least the spec's lease left, also on backends whose ``renew`` is a no-op,
  and a crashed driver's pool is reaped by ``backend.reap(expired=True)``.

A claimed sandbox belongs to the caller, who closes it. Labels are fixed at creation:
pool members carry ``patchgym.pool-id`` and the spec's run id, not a per-claim rollout id.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Self

from patchgym_sandbox import labels as L
from patchgym_sandbox.errors import ConfigError, SandboxClosed
from patchgym_sandbox.sandbox import Sandbox
from patchgym_sandbox.spec import SandboxSpec

if TYPE_CHECKING:
    from patchgym_sandbox.backend import SandboxBackend

log = logging.getLogger(__name__)


async def start_group(backend: SandboxBackend, spec: SandboxSpec, n: int) -> list[Sandbox]:
    """``n`` started sandboxes of ``spec``, started concurrently; all or none."""
    if n < 1:
        raise ConfigError(f"group size n must be >= 1, got {n}")
    return await start_all([backend.sandbox(spec) for _ in range(n)])


async def start_all(boxes: Sequence[Sandbox]) -> list[Sandbox]:
    """Start sandboxes made but not yet started, concurrently; all or none."""
    results = await asyncio.gather(*(b.start() for b in boxes), return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        await close_all(boxes)
        raise errors[0]
    return list(boxes)


def pool_key(spec: SandboxSpec) -> str:
    """What makes two specs' sandboxes interchangeable (labels, ids and lease aside)."""
    return spec.model_dump_json(exclude={"labels", "run_id", "rollout_id", "lease_s"})


async def claim_group(pool: SandboxPool, n: int) -> list[Sandbox]:
    """``n`` sandboxes claimed from ``pool`` at once; all or none."""
    if n < 1:
        raise ConfigError(f"group size n must be >= 1, got {n}")
    results = await asyncio.gather(*(pool.claim() for _ in range(n)), return_exceptions=True)
    boxes = [r for r in results if isinstance(r, Sandbox)]
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        await close_all(boxes)
        raise errors[0]
    return boxes


async def close_all(boxes: Sequence[Sandbox]) -> None:
    """Close every sandbox; cleanup errors are logged, never raised."""
    results = await asyncio.gather(*(b.close() for b in boxes), return_exceptions=True)
    for box, res in zip(boxes, results, strict=True):
        if isinstance(res, Exception):
            log.warning("closing %s failed: %s", box.id, res)


@dataclass(slots=True)
class PoolStats:
    hits: int = 0
    """Claims answered by a ready sandbox."""
    misses: int = 0
    """Claims that had to wait for a start (cold or in flight)."""
    started: int = 0
    failed_starts: int = 0


class SandboxPool:
    """``size`` started sandboxes of one spec kept ready (see the module docstring).

    ``async with backend.pool(spec, size=8) as pool: sb = await pool.claim()``.
    """

    def __init__(
        self,
        backend: SandboxBackend,
        spec: SandboxSpec,
        size: int,
        *,
        max_idle_s: float = 600.0,
    ) -> None:
        if size < 1:
            raise ConfigError(f"pool size must be >= 1, got {size}")
        if max_idle_s <= 0:
            raise ConfigError(f"max_idle_s must be > 0 seconds, got {max_idle_s!r}")
        self.id = "pool-" + uuid.uuid4().hex[:12]
        self.backend = backend
        self.size = size
        self.max_idle_s = max_idle_s
        self.claim_lease_s = spec.lease_s
        self.spec = spec.model_copy(
            update={
                "labels": {**spec.labels, L.POOL_ID: self.id},
                "lease_s": spec.lease_s + max_idle_s,
            }
        )
        self.key = pool_key(spec)
        self.stats = PoolStats()
        self.last_error: BaseException | None = None
        self._ready: deque[tuple[Sandbox, float]] = deque()
        self._starting: set[asyncio.Task[None]] = set()
        self._waiters: deque[asyncio.Future[Sandbox]] = deque()
        self._recycler: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def ready(self) -> int:
        return len(self._ready)

    async def __aenter__(self) -> Self:
        self.backend.warm_pools().setdefault(self.key, []).append(self)
        self.refill()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until ``size`` sandboxes are ready (starts them if needed)."""

        async def _wait() -> None:
            while len(self._ready) < self.size:
                self.refill()
                if not self._starting:
                    raise self.last_error or RuntimeError(f"pool {self.id} cannot fill")
                await asyncio.wait(set(self._starting), return_when=asyncio.FIRST_COMPLETED)

        await asyncio.wait_for(_wait(), timeout)

    def refill(self) -> None:
        """Start sandboxes in the background until ready + starting reaches ``size``."""
        if self._closed:
            return
        want = self.size + len(self._waiters) - len(self._ready) - len(self._starting)
        for _ in range(max(0, want)):
            task = asyncio.create_task(self._start_one())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)
        if self._recycler is None:
            self._recycler = asyncio.create_task(self._recycle_loop())

    async def claim(self) -> Sandbox:
        """A started sandbox, now the caller's to use and close."""
        if self._closed:
            raise SandboxClosed(f"pool {self.id} is closed")
        self._drop_stale()
        if self._ready:
            self.stats.hits += 1
            box, _ = self._ready.popleft()
        else:
            self.stats.misses += 1
            fut: asyncio.Future[Sandbox] = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            self.refill()
            try:
                box = await fut
            finally:
                if fut in self._waiters:
                    self._waiters.remove(fut)
        self.refill()
        try:
            await box.renew(self.claim_lease_s)
        except BaseException:
            await box.close()
            raise
        return box

    async def _start_one(self) -> None:
        box = self.backend.sandbox(self.spec)
        try:
            await box.start()
            await box.exec("true", timeout=120)  # a member is ready when it has run a command
        except asyncio.CancelledError:
            await asyncio.shield(box.close())  # cancelled by aclose mid-start: leave nothing
            raise
        except Exception as exc:
            await box.close()
            self.stats.failed_starts += 1
            self.last_error = exc
            log.warning("pool %s: start failed: %s", self.id, exc)
            if self._waiters:  # a claimer is waiting on this start: hand it the error
                self._waiters.popleft().set_exception(exc)
            return
        self.stats.started += 1
        if self._closed:
            await box.close()
            return
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(box)
                return
        self._ready.append((box, time.monotonic()))

    def _drop_stale(self) -> None:
        """Close (in the background) members that idled past ``max_idle_s``."""
        now = time.monotonic()
        while self._ready and now - self._ready[0][1] > self.max_idle_s:
            box, _ = self._ready.popleft()
            task = asyncio.create_task(box.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def _recycle_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.max_idle_s / 4)
            self._drop_stale()
            self.refill()

    async def aclose(self) -> None:
        """Close every sandbox not yet claimed; claimed ones are their callers' to close."""
        self._closed = True
        registered = self.backend.warm_pools().get(self.key, [])
        if self in registered:
            registered.remove(self)
        pending = [*self._starting, *([self._recycler] if self._recycler else [])]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, *self._closing, return_exceptions=True)
        for fut in self._waiters:
            fut.cancel()
        boxes, self._ready = [b for b, _ in self._ready], deque()
        await close_all(boxes)
