"""Status vocabularies shared by parsers, graders and verdicts."""

from __future__ import annotations

from enum import StrEnum


class TestStatus(StrEnum):
    """One test's outcome as a log parser reports it (the SWE-bench vocabulary).

    ``XPASS`` is deliberately absent: the harness's parsers never record it, so an
    unexpectedly passing xfail test is simply missing from the map and grades as a
    failure, exactly as in SWE-bench.
    """

    __test__ = False  # not a pytest test class

    PASSED = "PASSED"
    FAILED = "FAILED"
    ERROR = "ERROR"
    SKIPPED = "SKIPPED"
    XFAIL = "XFAIL"


class ResolvedStatus(StrEnum):
    """SWE-bench's resolution levels (FULL is the only one that counts as resolved)."""

    FULL = "RESOLVED_FULL"
    PARTIAL = "RESOLVED_PARTIAL"
    NO = "RESOLVED_NO"


class EvalType(StrEnum):
    """How absent tests are read: ``pass_and_fail`` (absent = failed) or ``fail_only``."""

    PASS_AND_FAIL = "pass_and_fail"
    FAIL_ONLY = "fail_only"


PASSING: frozenset[str] = frozenset({TestStatus.PASSED, TestStatus.XFAIL})
FAILING: frozenset[str] = frozenset({TestStatus.FAILED, TestStatus.ERROR})

StatusMap = dict[str, TestStatus]
"""Test id -> status, in first-seen order (order matters for truncated-id matching)."""

# Lower is worse: a test reported twice keeps the worse of its outcomes.
SEVERITY: dict[TestStatus, int] = {
    TestStatus.ERROR: 0,
    TestStatus.FAILED: 0,
    TestStatus.SKIPPED: 1,
    TestStatus.XFAIL: 2,
    TestStatus.PASSED: 3,
}


class WorstMap(dict[str, TestStatus]):
    """A status map where a test reported with conflicting outcomes keeps its worst one.

    The harness keeps the last line naming a test, so a patch that prints ``PASSED x``
    after the runner's ``FAILED x`` (an ``atexit`` hook) wins there; here it does not.
    ``conflicts`` names every id that was reported with more than one outcome.
    """

    def __init__(self) -> None:
        super().__init__()
        self.conflicts: dict[str, set[TestStatus]] = {}

    def __setitem__(self, key: str, value: TestStatus) -> None:
        old = self.get(key)
        if old is None:
            super().__setitem__(key, value)
            return
        if old != value:
            self.conflicts.setdefault(key, {old}).add(value)
        if SEVERITY[value] < SEVERITY[old]:
            super().__setitem__(key, value)


def new_status_map(worst: bool) -> StatusMap:
    """An empty status map: :class:`WorstMap` when ``worst``, else a plain dict (last wins)."""
    return WorstMap() if worst else {}


def conflicts_of(status_map: StatusMap) -> list[str]:
    """Ids the log reported with conflicting outcomes (empty for a last-wins map)."""
    return list(status_map.conflicts) if isinstance(status_map, WorstMap) else []
