"""R2E-Gym's reading of a pytest log (its ``run_tests.sh`` output).

Only the ``short test summary info`` section counts. A test's key drops the file
path and joins the remaining ``::`` parts with dots (``Class.test[param]``); statuses
are PASSED, FAILED and ERROR, found anywhere in the line, in that order of priority.
"""

from __future__ import annotations

from patchgym_rewards.status import TestStatus, new_status_map

_SUMMARY = "short test summary info"


def r2e_key(nodeid: str) -> str:
    """``path/test_x.py::Class::test_y[p]`` -> ``Class.test_y[p]``."""
    return ".".join(nodeid.split("::")[1:])


def parse_r2e(text: str, *, worst: bool = False, outer: bool = False) -> dict[str, TestStatus]:
    """Status map keyed the R2E way; empty when the log has no short summary.

    R2E-Gym reads from the first ``short test summary info`` to the next; ``outer``
    reads the last one instead (pytest's own, after any nested run's captured output).
    """
    start = text.rfind(_SUMMARY) if outer else text.find(_SUMMARY)
    if start < 0:
        return {}
    end = -1 if outer else text.find(_SUMMARY, start + len(_SUMMARY))
    section = text[start + len(_SUMMARY) : end if end >= 0 else len(text)]
    status_map = new_status_map(worst)
    for line in section.strip().split("\n"):
        if "PASSED" in line:
            status_map[r2e_key(line)] = TestStatus.PASSED
        elif "FAILED" in line:
            status_map[r2e_key(line).split(" - ")[0]] = TestStatus.FAILED
        elif "ERROR" in line:
            status_map[r2e_key(line).split(" - ")[0]] = TestStatus.ERROR
    return status_map
