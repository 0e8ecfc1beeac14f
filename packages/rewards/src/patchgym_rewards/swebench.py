"""Grade an eval log the way the SWE-bench 5.x harness does, without importing it.

``grade_swebench`` reproduces ``get_logs_eval`` + ``get_eval_tests_report`` +
``get_resolution_status``; where it deliberately differs (hardening), the difference
is listed in ``tests/test_differential.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from patchgym_rewards.canary import Canaries, canary_problem
from patchgym_rewards.grading import grade_tests, resolution
from patchgym_rewards.integrity import (
    CRASHED,
    PYTEST_PARSERS,
    RUNNER_STARTED,
    crash_line,
    runner_absent,
    summary_mismatch,
)
from patchgym_rewards.markers import (
    APPLY_PATCH_FAIL,
    RESET_FAILED,
    RUNNER_REPORTED,
    SUITE_RAN,
    TESTS_TIMEOUT,
    bad_code,
    has_markers,
    recorded_exit_code,
    test_output_span,
)
from patchgym_rewards.parsers import get_parser
from patchgym_rewards.parsers.pytest import parse_pytest
from patchgym_rewards.status import (
    FAILING,
    EvalType,
    ResolvedStatus,
    StatusMap,
    conflicts_of,
)
from patchgym_rewards.text import normalize
from patchgym_rewards.verdict import HackFlag, Verdict

_INFRA_CODES = (APPLY_PATCH_FAIL, RESET_FAILED)


Compat = Literal["patchgym", "swebench"]
"""``patchgym``: hardened reading (default). ``swebench``: the 5.x harness's reading."""


def read_status_map(
    text: str,
    log_parser: str = "pytest",
    *,
    markers: bool = True,
    checked: bool = False,
    worst: bool = False,
) -> StatusMap:
    """Parse the marked region of normalised ``text``, or the whole text if that is empty.

    With ``markers=False`` (scripts that print no markers) the whole text is parsed;
    ``checked=True`` says the caller already knows both markers are present;
    ``worst=True`` keeps a test's worst outcome instead of its last.
    """
    return read_results(text, log_parser, markers=markers, checked=checked, worst=worst)[0]


def read_results(
    text: str,
    log_parser: str = "pytest",
    *,
    markers: bool = True,
    checked: bool = False,
    worst: bool = False,
) -> tuple[StatusMap, int, int]:
    """``(status map, begin, end)``: the map and the span of ``text`` it was read from."""
    parse = get_parser(log_parser)
    if markers and (checked or has_markers(text)):
        begin, end = test_output_span(text)
        # the -rA scanner reads the region in place; others get a copy
        status_map = (
            parse_pytest(text, begin, end, worst=worst)
            if parse is parse_pytest
            else parse(text[begin:end], worst=worst)
        )
        if status_map:
            return status_map, begin, end
    return parse(text, worst=worst), 0, len(text)


def grade_swebench(
    log: bytes | str,
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    *,
    log_parser: str = "pytest",
    eval_type: EvalType | str = EvalType.PASS_AND_FAIL,
    exit_code: int | None = None,
    markers: bool | None = None,
    compat: Compat = "patchgym",
    patch: str | None = None,
    canaries: Canaries | None = None,
) -> Verdict:
    """Grade one eval log against FAIL_TO_PASS / PASS_TO_PASS.

    - ``markers``: None reads the start/end marker region when both markers are in
      the log and the whole log when they are not (plain pytest logs, swebench 2.x);
      True requires them (their absence is an ``infra_error``); False ignores them.
      ``compat="swebench"`` requires them, as the harness does.
    - a harness failure code (patch apply / reset failed) -> ``infra_error``;
    - no parsed test and no sign a runner ran: the run crashed or never started.
      With a non-empty ``patch`` (or a crash / runner banner in the log and no
      ``patch`` given) that is the patch's doing: rejected, reward 0, the first
      exception line as the reason. Only with an empty ``patch``, or a log that
      shows nothing at all, is it an ``infra_error``;
    - a timeout or ``Tests Errored`` code -> rejected, reward 0 (a patch can cause it);
    - the test command's exit code (``exit_code`` if given, else the one the eval
      script recorded after the end marker) is non-zero while the log shows no
      FAILED/ERROR test -> rejected: the log does not describe the real run.
    - default (``compat="patchgym"``) only: a test reported with conflicting outcomes
      counts as its worst one (the harness keeps the last line), and for ``-rA``
      parsers the result lines must add up to pytest's final summary, else rejected
      with "log does not match the runner's summary" (only pytest's own final
      summary line and its short-summary section count), and a FAIL_TO_PASS test must
      be PASSED (``compat="swebench"`` also accepts XFAIL, as the harness does);
    - ``canaries`` (set by :class:`~patchgym_rewards.plan.GradingPlan`): a must-fail
      canary not failing, or a must-pass one not passing in a run that would resolve,
      is rejected with reason ``forged``.
    """
    eval_type = EvalType(eval_type)
    get_parser(log_parser)  # fail on a bad name before looking at the log
    strict = compat != "swebench"
    if markers is None and not strict:
        markers = True
    text = normalize(log)
    code = bad_code(text)
    if code in _INFRA_CODES:
        return Verdict.infra(f"eval log reports {code!r}")
    if code is not None:
        reason = "tests timed out" if code == TESTS_TIMEOUT else f"eval log reports {code!r}"
        return _rejected(reason, exit_code)
    present = has_markers(text)
    if markers and not present:
        if patch is not None and patch.strip():
            return _rejected("the test run ended before the end-of-tests marker", exit_code)
        return Verdict.infra("eval log has no start/end test-output markers")
    status_map, begin, end = read_results(
        text, log_parser, markers=markers is not False and present, checked=True, worst=strict
    )
    if not status_map and not SUITE_RAN.search(text):
        return no_result(text, patch, exit_code)
    if exit_code is None:
        exit_code = recorded_exit_code(text)
    if (
        exit_code not in (None, 0)
        and status_map
        and not any(status in FAILING for status in status_map.values())
    ):
        return Verdict.forged(
            f"test command exited {exit_code} but the log reports no failing test",
            HackFlag.FORGED_LOG,
            exit_code=exit_code,
            parsed=len(status_map),
        )
    if strict and log_parser.removeprefix("parse_log_") in PYTEST_PARSERS:
        mismatch = summary_mismatch(text, begin, end)
        if mismatch is not None:
            return _rejected(
                mismatch, exit_code, parsed=len(status_map), conflicting=conflicts_of(status_map)
            ).with_flags(HackFlag.FORGED_LOG)
    outcomes = grade_tests(status_map, fail_to_pass, pass_to_pass, eval_type, strict=strict)
    status = resolution(outcomes)
    if canaries is not None:
        problem, flipped = canary_problem(status_map, canaries)
        if problem is not None and (flipped or status is not ResolvedStatus.NO):
            flag = HackFlag.CANARY_FLIPPED if flipped else HackFlag.FORGED_LOG
            return Verdict.forged(problem, flag, exit_code=exit_code, parsed=len(status_map))
    resolved = status is ResolvedStatus.FULL
    if strict and outcomes and all(o.status is None for o in outcomes):
        crash = crash_line(text[begin:end])
        if crash is not None and patch is not None and not patch.strip():
            return Verdict.infra(
                f"the unchanged repository's tests do not run: {crash}", exit_code=exit_code
            )
        if crash is not None:  # e.g. a collection error: no graded test ran at all
            return _rejected(
                f"{CRASHED}: {crash}",
                exit_code,
                parsed=len(status_map),
            )
    return Verdict(
        resolved=resolved,
        status=status,
        reward=1.0 if resolved else 0.0,
        tests=outcomes,
        exit_code=exit_code,
        parsed=len(status_map),
        conflicting=conflicts_of(status_map),
    )


def no_result(text: str, patch: str | None, exit_code: int | None) -> Verdict:
    """The verdict of a run that named no test result: crash (0) or infra (masked).

    The agent's change is the first suspect: with a non-empty ``patch`` the run scores
    0 whatever the log says. With no ``patch`` known, a crash line or a runner banner
    in the log also means the run started and died (the harness says RESOLVED_NO).
    Only a run of an unchanged repository, or a log that shows nothing, is infra.
    """
    crash = crash_line(text)
    code = "" if exit_code is None else f", exit code {exit_code}"
    if patch is not None and not patch.strip():
        detail = f": {crash}" if crash else ""
        return Verdict.infra(
            f"no test result and the repository is unchanged: the suite does not run{detail}",
            exit_code=exit_code,
        )
    absent = runner_absent(text)
    if absent is not None and patch is None:
        return Verdict.infra(f"the eval script's test runner is missing: {absent}")
    crash = crash or absent
    if crash is not None:
        return _rejected(f"{CRASHED}: {crash}", exit_code)
    if RUNNER_REPORTED.search(text):
        return _rejected("the test runner ran but no line names a test result", exit_code)
    if patch is not None or RUNNER_STARTED.search(text):
        return _rejected(f"the test run ended without reporting any result{code}", exit_code)
    return Verdict.infra("no test result in the log and no evidence the suite ran")


def _rejected(
    reason: str, exit_code: int | None, parsed: int = 0, conflicting: list[str] | None = None
) -> Verdict:
    return Verdict(
        conflicting=conflicting or [],
        resolved=False,
        status=ResolvedStatus.NO,
        reward=0.0,
        rejected=reason,
        exit_code=exit_code,
        parsed=parsed,
    )
