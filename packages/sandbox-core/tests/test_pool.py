"""Pool and group edge cases on the local backend: misses, failed starts, recycling."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from patchgym_sandbox import ConfigError, SandboxGroups, SandboxSpec, create_backend
from patchgym_sandbox import labels as L


@pytest.fixture
def template(tmp_path: Path) -> Path:
    root = tmp_path / "tpl"
    root.mkdir()
    (root / "f.txt").write_text("x\n")
    return root


async def test_claim_on_an_empty_pool_starts_one(tmp_path: Path, template: Path) -> None:
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    async with backend.pool(SandboxSpec(template=str(template)), size=1) as pool:
        first, second = await asyncio.gather(pool.claim(), pool.claim())
        assert first.id != second.id and pool.stats.misses >= 1
        await asyncio.gather(first.close(), second.close())
    assert await backend.list_sandboxes() == []


async def test_failed_start_reaches_the_claimer(tmp_path: Path) -> None:
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    bad = SandboxSpec(template=str(tmp_path / "missing"))
    async with backend.pool(bad, size=2) as pool:
        with pytest.raises(ConfigError, match="not a directory"):
            await pool.claim()
        assert isinstance(pool.last_error, ConfigError)
    with pytest.raises(ConfigError, match="not a directory"):
        await backend.create_group(bad, 3)
    assert await backend.list_sandboxes() == []


async def test_idle_members_are_recycled(tmp_path: Path, template: Path) -> None:
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    async with backend.pool(SandboxSpec(template=str(template)), size=2, max_idle_s=0.4) as pool:
        await pool.wait_ready(timeout=30)
        first = {i.id for i in await backend.list_sandboxes({L.POOL_ID: pool.id})}
        await asyncio.sleep(1.2)
        await pool.wait_ready(timeout=30)
        now = {i.id for i in await backend.list_sandboxes({L.POOL_ID: pool.id})}
        assert now and not (now & first)
    assert await backend.list_sandboxes() == []


async def test_bad_sizes_are_config_errors(tmp_path: Path, template: Path) -> None:
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    with pytest.raises(ConfigError, match="pool size"):
        backend.pool(SandboxSpec(template=str(template)), size=0)
    with pytest.raises(ConfigError, match="group size"):
        SandboxGroups(backend, 0)


async def test_unclaimed_group_members_close_after_linger(tmp_path: Path, template: Path) -> None:
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    groups = SandboxGroups(backend, 4, linger_s=0.3)
    try:
        box = await groups.claim("t", SandboxSpec(template=str(template)))
        assert len(await backend.list_sandboxes()) == 4
        await asyncio.sleep(1.0)
        assert [i.id for i in await backend.list_sandboxes()] == [box.id]
        await box.close()
    finally:
        await groups.aclose()


async def test_windowed_group_is_as_large_as_its_claims(tmp_path: Path, template: Path) -> None:
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    groups = SandboxGroups(backend, window_s=0.2)
    spec = SandboxSpec(template=str(template))
    try:
        boxes = await asyncio.gather(*(groups.claim("t", spec) for _ in range(3)))
        assert len({b.id for b in boxes}) == 3 and groups.groups_made == 1
        assert len(await backend.list_sandboxes()) == 3  # nobody's member was made
        late = await groups.claim("t", spec)  # after the window: a new group of one
        assert groups.groups_made == 2
        await asyncio.gather(*(b.close() for b in [*boxes, late]))
    finally:
        await groups.aclose()
    assert await backend.list_sandboxes() == []


async def test_groups_claim_from_an_open_pool_of_the_same_shape(
    tmp_path: Path, template: Path
) -> None:
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    spec = SandboxSpec(template=str(template))
    async with backend.pool(spec, size=3) as pool:
        await pool.wait_ready(timeout=30)
        boxes = await backend.create_group(spec.model_copy(update={"run_id": "r1"}), 3)
        assert pool.stats.hits == 3 and pool.stats.misses == 0
        other = await backend.create_group(spec.model_copy(update={"workdir": "/elsewhere"}), 1)
        assert pool.stats.hits == 3  # another shape: started cold, not from this pool
        await asyncio.gather(*(b.close() for b in [*boxes, *other]))
    assert not any(backend.warm_pools().values())
    assert await backend.list_sandboxes() == []
