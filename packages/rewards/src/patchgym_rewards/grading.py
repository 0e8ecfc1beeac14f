"""Status map + expected test lists -> per-test outcomes and resolution (SWE-bench 5.x).

Log-format independent: :mod:`patchgym_rewards.swebench` and
:mod:`patchgym_rewards.swesmith` feed it the status maps their parsers produce.
"""

from __future__ import annotations

from collections.abc import Sequence

from patchgym_rewards.status import PASSING, EvalType, ResolvedStatus, StatusMap, TestStatus
from patchgym_rewards.verdict import TestOutcome, TestRole


def resolve_id(case: str, status_map: StatusMap) -> str | None:
    """The status-map key for ``case``, tolerating truncated parametrised ids.

    Exact ids match exactly. An id with more ``[`` than ``]`` (the dataset cut it
    mid-parameter) matches the first id it prefixes, but only when every id it
    prefixes agrees on pass vs fail; otherwise it is absent.
    """
    if case in status_map:
        return case
    if case.count("[") > case.count("]"):
        matches = [key for key in status_map if key.startswith(case)]
        if matches and len({status_map[key] in PASSING for key in matches}) == 1:
            return matches[0]
    return None


def _outcome(
    case: str, role: TestRole, status_map: StatusMap, eval_type: EvalType, strict: bool
) -> TestOutcome:
    if eval_type is EvalType.FAIL_ONLY:
        status = status_map.get(case)
        return TestOutcome(name=case, role=role, status=status, ok=status != TestStatus.FAILED)
    key = resolve_id(case, status_map)
    status = status_map[key] if key is not None else None
    if strict and role is TestRole.FAIL_TO_PASS:
        ok = status is TestStatus.PASSED
    else:
        ok = status in PASSING or (role is TestRole.PASS_TO_PASS and status is TestStatus.SKIPPED)
    return TestOutcome(
        name=case,
        role=role,
        status=status,
        matched_as=key if key is not None and key != case else None,
        ok=ok,
    )


def grade_tests(
    status_map: StatusMap,
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    eval_type: EvalType = EvalType.PASS_AND_FAIL,
    *,
    strict: bool = False,
) -> list[TestOutcome]:
    """One outcome per FAIL_TO_PASS then PASS_TO_PASS test.

    F2P passes on PASSED/XFAIL (``strict``: PASSED only, its gold outcome: a test
    turned into an expected failure fixes nothing); a skipped or absent F2P test
    fails. P2P also accepts SKIPPED (not a regression). Under ``fail_only`` only an
    explicit FAILED fails.
    """
    return [
        *(_outcome(t, TestRole.FAIL_TO_PASS, status_map, eval_type, strict) for t in fail_to_pass),
        *(_outcome(t, TestRole.PASS_TO_PASS, status_map, eval_type, strict) for t in pass_to_pass),
    ]


def _ratio(outcomes: Sequence[TestOutcome], role: TestRole) -> float:
    graded = [o for o in outcomes if o.role is role]
    if not graded:
        return 1.0
    return sum(o.ok for o in graded) / len(graded)


def resolution(outcomes: Sequence[TestOutcome]) -> ResolvedStatus:
    """FULL iff all F2P and P2P pass; PARTIAL iff some (not all, not none) F2P pass
    with every P2P passing; else NO. Empty lists count as fully passing."""
    f2p = _ratio(outcomes, TestRole.FAIL_TO_PASS)
    p2p = _ratio(outcomes, TestRole.PASS_TO_PASS)
    if f2p == 1 and p2p == 1:
        return ResolvedStatus.FULL
    if 0 < f2p < 1 and p2p == 1:
        return ResolvedStatus.PARTIAL
    return ResolvedStatus.NO
