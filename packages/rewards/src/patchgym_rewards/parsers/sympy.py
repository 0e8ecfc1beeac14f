"""Parser for sympy's own test runner (``bin/test -C --verbose``)."""

from __future__ import annotations

import re

from patchgym_rewards.status import StatusMap, TestStatus, new_status_map

# Failure headers: "_____ sympy/core/tests/test_x.py:test_name _____".
_FAILURE_HEADER = re.compile(r"(_*) (.*)\.py:(.*) (_*)")
_ENDINGS = ((" E", TestStatus.ERROR), (" F", TestStatus.FAILED), (" ok", TestStatus.PASSED))


def parse_sympy(text: str, *, worst: bool = False) -> StatusMap:
    """``test_name ok|F|E`` lines plus ``path.py:test_name`` failure headers.

    Expected failures (``f``) and skips (``s``) are not recorded, as upstream.
    """
    status_map = new_status_map(worst)
    for match in _FAILURE_HEADER.finditer(text):
        status_map[f"{match.group(2)}.py:{match.group(3)}"] = TestStatus.FAILED
    for raw in text.split("\n"):
        line = raw.strip()
        if not line.startswith("test_"):
            continue
        for ending, status in _ENDINGS:
            if line.endswith(ending):
                status_map[line.split()[0]] = status
    return status_map
