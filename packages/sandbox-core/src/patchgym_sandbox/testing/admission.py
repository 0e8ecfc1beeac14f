"""Checks on admission control that any backend's tests can use."""

from __future__ import annotations

from collections.abc import Sequence

from patchgym_sandbox.sandbox import Sandbox


def most_starting_at_once(boxes: Sequence[Sandbox]) -> int:
    """The most of ``boxes`` that were provisioning at the same moment (from each
    sandbox's ``start_window``, stamped by ``Sandbox.start`` itself)."""
    edges: list[tuple[float, int]] = []
    for box in boxes:
        assert box.start_window is not None, f"{box.id} never started"
        began, ended = box.start_window
        edges += [(began, 1), (ended, -1)]
    most = now = 0
    for _, step in sorted(edges):  # at a tie an end (-1) sorts first: touching is not overlap
        now += step
        most = max(most, now)
    return most
