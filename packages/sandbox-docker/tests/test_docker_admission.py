"""Admission control on the real engine: a burst of 64 creates never has more than
``max_starting`` containers provisioning at once, and nothing is left behind."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from patchgym_sandbox import LocalAdmission, SandboxSpec, create_backend
from patchgym_sandbox.testing.admission import most_starting_at_once

BURST = 64
CAP = 4


async def test_burst_of_creates_holds_the_cap(
    docker_config: Callable[..., dict[str, Any]], test_image: str
) -> None:
    backend = create_backend(docker_config(max_starting=CAP))
    boxes = [backend.sandbox(SandboxSpec(image=test_image)) for _ in range(BURST)]
    try:
        results = await asyncio.gather(*(b.start() for b in boxes), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        assert not errors, errors[:3]
        assert most_starting_at_once(boxes) <= CAP
        gate = backend.admission
        assert isinstance(gate, LocalAdmission)
        assert gate.high_water == CAP and gate.in_flight == 0
        ran = await asyncio.gather(*(b.exec("echo ok") for b in boxes[:: BURST // 8]))
        assert all(r.stdout == "ok\n" for r in ran)
    finally:
        await asyncio.gather(*(b.close() for b in boxes))
        left = await backend.list_sandboxes(docker_config()["labels"])
        await backend.aclose()
    assert left == []
