"""Warm pools and groups on a real backend: part of every backend's conformance suite.

Mixed into :class:`~patchgym_sandbox.testing.SandboxConformance`; uses its ``backend`` and
``sandbox_spec`` fixtures. ``group_size`` scales the tests to the engine.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import ClassVar

import pytest

from patchgym_sandbox import labels as L
from patchgym_sandbox.backend import SandboxBackend
from patchgym_sandbox.errors import SandboxClosed
from patchgym_sandbox.groups import SandboxGroups
from patchgym_sandbox.spec import SandboxSpec


class PoolConformance:
    group_size: ClassVar[int] = 3

    @pytest.mark.asyncio
    async def test_group_is_n_separate_started_sandboxes(
        self, backend: SandboxBackend, sandbox_spec: SandboxSpec
    ) -> None:
        run = f"group-{uuid.uuid4().hex[:8]}"
        boxes = await backend.create_group(sandbox_spec.model_copy(update={"run_id": run}), 3)
        try:
            assert len({b.id for b in boxes}) == 3 and all(b.started for b in boxes)
            await boxes[0].write_file("only-here.txt", "x")
            others = await asyncio.gather(*(b.exec("ls only-here.txt") for b in boxes[1:]))
            assert all(r.exit_code != 0 for r in others)
            assert len(await backend.list_sandboxes({L.RUN_ID: run})) == 3
        finally:
            await asyncio.gather(*(b.close() for b in boxes))
        assert await backend.list_sandboxes({L.RUN_ID: run}) == []

    @pytest.mark.asyncio
    async def test_pool_claims_refills_and_closes_only_unclaimed(
        self, backend: SandboxBackend, sandbox_spec: SandboxSpec
    ) -> None:
        spec = sandbox_spec.model_copy(update={"run_id": f"pool-{uuid.uuid4().hex[:8]}"})
        pool = backend.pool(spec, size=2, max_idle_s=300)
        async with pool:
            await pool.wait_ready(timeout=300)
            members = await backend.list_sandboxes({L.POOL_ID: pool.id})
            assert len(members) == 2
            expiry = min(float(m.labels[L.EXPIRES_AT]) for m in members)
            assert expiry >= time.time() + spec.lease_s  # a claim always has its full lease
            claimed = await pool.claim()
            assert pool.stats.hits == 1 and claimed.started
            assert (await claimed.exec("echo claimed")).stdout == "claimed\n"
            await pool.wait_ready(timeout=300)  # refilled in the background
            assert pool.ready == 2
        assert pool.ready == 0
        left = await backend.list_sandboxes({L.POOL_ID: pool.id})
        # the caller's sandbox survives the pool (a cloud lists its own id; ours is a label)
        assert [m.labels.get(L.SANDBOX_ID, m.id) for m in left] == [claimed.id], left
        assert (await claimed.exec("true")).ok
        await claimed.close()
        assert await backend.list_sandboxes({L.POOL_ID: pool.id}) == []
        with pytest.raises(SandboxClosed):
            await pool.claim()

    @pytest.mark.asyncio
    async def test_groups_hand_each_claim_its_own_member(
        self, backend: SandboxBackend, sandbox_spec: SandboxSpec
    ) -> None:
        n = self.group_size
        run = f"groups-{uuid.uuid4().hex[:8]}"
        spec = sandbox_spec.model_copy(update={"run_id": run})
        groups = SandboxGroups(backend, n, linger_s=60)
        try:
            boxes = await asyncio.gather(*(groups.claim("task-a", spec) for _ in range(n)))
            assert len({b.id for b in boxes}) == n and groups.groups_made == 1
            extra = await groups.claim("task-b", spec)  # another key: another group of n
            assert groups.groups_made == 2
            await asyncio.gather(*(b.close() for b in [*boxes, extra]))
        finally:
            await groups.aclose()
        assert await backend.list_sandboxes({L.RUN_ID: run}) == []
