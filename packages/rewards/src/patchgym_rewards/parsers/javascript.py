"""Parser for Jest's ``--verbose`` output (JS tasks, often graded ``fail_only``)."""

from __future__ import annotations

import re

from patchgym_rewards.status import StatusMap, TestStatus, new_status_map

_LINE = re.compile(r"^\s*(✓|✕|○)\s(.+?)(?:\s\((\d+\s*m?s)\))?$")
_SYMBOLS = {"✓": TestStatus.PASSED, "✕": TestStatus.FAILED, "○": TestStatus.SKIPPED}


def parse_jest(text: str, *, worst: bool = False) -> StatusMap:
    """``✓ name (3 ms)`` passed, ``✕ name`` failed, ``○ name`` skipped; durations dropped."""
    status_map = new_status_map(worst)
    for raw in text.split("\n"):
        match = _LINE.match(raw.strip())
        if match is not None:
            status_map[match.group(2).strip()] = _SYMBOLS[match.group(1)]
    return status_map
