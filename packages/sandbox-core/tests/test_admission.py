"""Admission control: at most ``max_starting`` provisioning at once, ``creates_per_s`` paced,
through plain starts, groups, pools and forks; bad settings name their field."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from patchgym_sandbox import ConfigError, LocalAdmission, SandboxSpec, create_backend, load_config
from patchgym_sandbox.admission import TokenBucket
from patchgym_sandbox.testing.admission import most_starting_at_once


async def test_gate_holds_the_cap_and_hands_slots_on() -> None:
    gate = LocalAdmission(max_starting=3)
    holding = 0
    go = asyncio.Event()
    admitted = asyncio.Condition()

    async def one() -> None:
        nonlocal holding
        await gate.acquire()
        async with admitted:
            holding += 1
            admitted.notify_all()
        await go.wait()
        holding -= 1
        await gate.release()

    tasks = [asyncio.create_task(one()) for _ in range(10)]
    async with admitted:
        await asyncio.wait_for(admitted.wait_for(lambda: holding == 3), 30)
    for _ in range(5):  # the others stay parked however often the loop turns
        await asyncio.sleep(0)
    assert holding == 3 and gate.in_flight == 3
    go.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    assert gate.high_water == 3 and gate.in_flight == 0


def test_token_bucket_paces_after_the_burst() -> None:
    bucket = TokenBucket(rate=2.0, burst=2)
    t = bucket._at
    assert bucket.take(t) == 0.0 and bucket.take(t) == 0.0  # the burst
    assert bucket.take(t) == pytest.approx(0.5)  # then one every 1/rate s, reserved in turn
    assert bucket.take(t) == pytest.approx(1.0)
    assert bucket.take(t + 10.0) == 0.0  # refilled (capped at the burst)


def test_bad_settings_name_the_field() -> None:
    for field, value in (("max_starting", 0), ("creates_per_s", -1), ("creates_burst", 0)):
        with pytest.raises(ConfigError, match=field):
            load_config({"type": "local", field: value})
    assert load_config({"type": "local"}).make_admission() is None


@pytest.fixture
def template(tmp_path: Path) -> Path:
    root = tmp_path / "tpl"
    root.mkdir()
    (root / "f.txt").write_text("x\n")
    return root


async def test_starts_groups_pools_and_forks_hold_the_cap(tmp_path: Path, template: Path) -> None:
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s"), "max_starting": 2})
    spec = SandboxSpec(template=str(template))
    plain = [backend.sandbox(spec) for _ in range(5)]
    group: list = []
    try:
        await asyncio.gather(*(b.start() for b in plain))
        group = await backend.create_group(spec, 4)
        async with backend.pool(spec, size=3) as pool:
            await pool.wait_ready(timeout=120)
            claimed = await pool.claim()
            group.append(claimed)
        group += await plain[0].fork(3)
        assert most_starting_at_once([*plain, *group]) <= 2
        gate = backend.admission
        assert isinstance(gate, LocalAdmission) and gate.high_water <= 2 and gate.in_flight == 0
    finally:
        await asyncio.gather(*(b.close() for b in [*plain, *group]))
    assert await backend.list_sandboxes() == []


async def test_creation_rate_spaces_the_starts(tmp_path: Path, template: Path) -> None:
    rate = 4.0
    backend = create_backend(
        {"type": "local", "state_dir": str(tmp_path / "s"), "creates_per_s": rate,
         "creates_burst": 1}
    )  # fmt: skip
    boxes = [backend.sandbox(SandboxSpec(template=str(template))) for _ in range(4)]
    try:
        await asyncio.gather(*(b.start() for b in boxes))
        began = sorted(b.start_window[0] for b in boxes if b.start_window)
        # a lower bound only (load can only stretch it): n starts need (n - burst) / rate s
        assert began[-1] - began[0] >= (len(boxes) - 1) / rate * 0.99
        assert sum(b.admission_wait_s > 0 for b in boxes) >= len(boxes) - 1
    finally:
        await asyncio.gather(*(b.close() for b in boxes))
