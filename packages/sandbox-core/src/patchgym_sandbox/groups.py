"""Groups for GRPO/RLOO: the n rollouts of one task claim n sandboxes made together.

A trainer or rollout runner starts the n samples of a task as n independent episodes;
:class:`SandboxGroups` lets each episode ``claim(key, spec)`` its sandbox while the first
claim of a key asks the backend for all ``n`` at once (``backend.create_group``), so the
group's creation costs one round of concurrent starts (or the backend's fast path)
instead of n separate ones. Members not claimed within ``linger_s`` after the group is
ready are closed (a sample may have landed on another worker), and so are all unclaimed
members at :meth:`aclose`.

The group size is ``n`` when the claimer knows it (``claim(key, spec, n=4)``: a rollout
runner). Otherwise (``n=None``: verl launches the samples of a batch chunk together, and
a worker may get only some of a prompt's n) the claims of a key that arrive within
``window_s`` of the first one form the group, so no member is made for nobody.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from patchgym_sandbox.errors import ConfigError, SandboxClosed
from patchgym_sandbox.pool import close_all
from patchgym_sandbox.sandbox import Sandbox
from patchgym_sandbox.spec import SandboxSpec

if TYPE_CHECKING:
    from patchgym_sandbox.backend import SandboxBackend

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Group:
    left: int
    """Claims still expected from this group (fixed size) or claims so far (windowed)."""
    making: asyncio.Task[list[Sandbox]] | None = None
    members: list[Sandbox] = field(default_factory=list)
    ready_at: float | None = None


class SandboxGroups:
    """Hands out sandboxes of per-key groups of ``n`` (see the module docstring)."""

    def __init__(
        self,
        backend: SandboxBackend,
        n: int | None = None,
        *,
        linger_s: float = 120.0,
        window_s: float = 0.05,
    ) -> None:
        if n is not None and n < 1:
            raise ConfigError(f"group size n must be >= 1, got {n}")
        self.backend = backend
        self.n = n
        self.linger_s = linger_s
        self.window_s = window_s
        self._groups: dict[Hashable, _Group] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._closed = False
        self.groups_made = 0

    async def claim(self, key: Hashable, spec: SandboxSpec, n: int | None = None) -> Sandbox:
        """A started sandbox for ``key``; the first claim of a key makes its whole group.

        ``n`` (or the constructor's ``n``) fixes the group size; without one the claims
        of ``key`` within ``window_s`` form the group.
        """
        if self._closed:
            raise SandboxClosed("the sandbox groups are closed")
        size = n if n is not None else self.n
        if size is not None and size < 1:
            raise ConfigError(f"group size n must be >= 1, got {size}")
        group = self._groups.get(key)
        if group is None:
            group = _Group(left=size if size is not None else 0)
            if size is not None:
                group.making = asyncio.create_task(self.backend.create_group(spec, size))
            else:
                group.making = asyncio.create_task(self._make_after_window(key, group, spec))
            self._groups[key] = group
            self.groups_made += 1
            if self._sweeper is None:
                self._sweeper = asyncio.create_task(self._sweep())
        if size is not None:
            group.left -= 1
            if group.left <= 0:
                self._groups.pop(key, None)
        else:
            group.left += 1
        assert group.making is not None
        try:
            boxes = await asyncio.shield(group.making)
        except Exception:
            if self._groups.get(key) is group:
                self._groups.pop(key, None)  # the next claim of this key tries again
            raise
        if group.ready_at is None:
            group.ready_at = time.monotonic()
            group.members = list(boxes)
        if not group.members:
            raise SandboxClosed(f"group {key!r} was closed before this claim")
        return group.members.pop()

    async def _make_after_window(
        self, key: Hashable, group: _Group, spec: SandboxSpec
    ) -> list[Sandbox]:
        await asyncio.sleep(self.window_s)
        if self._groups.get(key) is group:
            self._groups.pop(key, None)  # later claims of this key make a new group
        return await self.backend.create_group(spec, group.left)

    async def _sweep(self) -> None:
        while not self._closed:
            await asyncio.sleep(max(0.05, min(self.linger_s / 4, 5.0)))
            now = time.monotonic()
            for key, group in list(self._groups.items()):
                if group.ready_at is not None and now - group.ready_at > self.linger_s:
                    self._groups.pop(key, None)
                    log.info("closing %d unclaimed sandboxes of group %r", len(group.members), key)
                    await close_all(group.members)

    async def aclose(self) -> None:
        """Close every sandbox not yet claimed (claimed ones are their callers' to close)."""
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
        groups, self._groups = list(self._groups.values()), {}
        for group in groups:
            if group.making is None:
                continue
            try:
                boxes = await group.making
            except Exception:
                continue
            if group.ready_at is None:
                group.ready_at, group.members = time.monotonic(), list(boxes)
            members, group.members = group.members, []
            await close_all(members)
