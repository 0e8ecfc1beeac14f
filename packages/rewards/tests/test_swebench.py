"""SWE-bench 5.x grading semantics, on small logs in the harness's eval-script shape."""

from __future__ import annotations

from typing import Any

import pytest
from rewards_corpus import corpus_log

from patchgym_rewards import (
    ResolvedStatus,
    TestStatus,
    grade_swebench,
    grade_swesmith,
    grade_tests,
    resolve_id,
)
from patchgym_rewards.errors import InvalidTaskError


def eval_log(body: str, exit_code: int | None = 0) -> str:
    tail = f"\n>>>>> Test Exit Code: {exit_code}\n" if exit_code is not None else "\n"
    return (
        "+ : '>>>>> Start Test Output'\n+ pytest -rA\n"
        + body
        + "\n+ : '>>>>> End Test Output'"
        + tail
    )


SUITE = "PASSED t.py::f2p\nPASSED t.py::p2p\nSKIPPED t.py::skipped\nFAILED t.py::broken - x\n"


def test_resolved_and_per_test_table() -> None:
    v = grade_swebench(eval_log(SUITE, 1), ["t.py::f2p"], ["t.py::p2p", "t.py::skipped"])
    assert v.resolved and v.reward == 1.0 and v.status is ResolvedStatus.FULL
    assert [(t.name, t.status, t.ok) for t in v.tests] == [
        ("t.py::f2p", TestStatus.PASSED, True),
        ("t.py::p2p", TestStatus.PASSED, True),
        ("t.py::skipped", TestStatus.SKIPPED, True),
    ]


def test_skipped_f2p_fails_and_partial_status() -> None:
    v = grade_swebench(eval_log(SUITE, 1), ["t.py::f2p", "t.py::skipped"], ["t.py::p2p"])
    assert not v.resolved and v.status is ResolvedStatus.PARTIAL
    assert v.f2p_passed == 1 and v.f2p_total == 2


def test_broken_p2p_is_no() -> None:
    v = grade_swebench(eval_log(SUITE, 1), ["t.py::f2p"], ["t.py::broken"])
    assert v.status is ResolvedStatus.NO


def test_missing_test_fails() -> None:
    v = grade_swebench(eval_log(SUITE, 1), ["t.py::absent"], [])
    assert not v.resolved and v.tests[0].status is None


def test_truncated_ids_match_by_prefix_when_unambiguous() -> None:
    sm = {"t.py::p[a b]": TestStatus.PASSED, "t.py::p[a c]": TestStatus.XFAIL}
    assert resolve_id("t.py::p[a", sm) == "t.py::p[a b]"
    sm["t.py::p[a d]"] = TestStatus.FAILED
    assert resolve_id("t.py::p[a", sm) is None  # candidates disagree
    assert resolve_id("t.py::p", sm) is None  # not truncated: exact only
    [outcome] = grade_tests({"t.py::q[x y]": TestStatus.PASSED}, ["t.py::q[x"], [])
    assert outcome.ok and outcome.matched_as == "t.py::q[x y]"


def test_fail_only_counts_only_explicit_failures() -> None:
    v = grade_swebench(
        eval_log("FAILED t.py::a\nPASSED t.py::b\n", 1),
        ["t.py::absent", "t.py::b"],
        ["t.py::a"],
        eval_type="fail_only",
    )
    assert v.status is ResolvedStatus.NO and v.f2p_passed == 2


def test_region_first_then_whole_log() -> None:
    outside = "PASSED t.py::f2p\n+ : '>>>>> Start Test Output'\n+ : '>>>>> End Test Output'\n"
    assert grade_swebench(outside, ["t.py::f2p"], []).resolved
    inside_wins = "PASSED t.py::f2p\n" + eval_log("FAILED t.py::f2p - x", 1)
    assert not grade_swebench(inside_wins, ["t.py::f2p"], []).resolved


@pytest.mark.parametrize(
    ("log", "kwargs", "reason"),
    [
        ("PASSED t.py::f2p\n", {"markers": True}, "markers"),
        ("PASSED t.py::f2p\n", {"compat": "swebench"}, "markers"),
        (eval_log("bash: pytest: command not found", 127), {}, "runner is missing"),
        (eval_log("/usr/bin/python3: No module named pytest", 1), {}, "runner is missing"),
        (eval_log(SUITE) + ">>>>> Patch Apply Failed\n", {}, "Patch Apply Failed"),
        ("", {}, "no evidence"),
        ("", {"markers": True}, "markers"),
        (eval_log("E   SyntaxError: bad", 2), {"patch": ""}, "repository is unchanged"),
    ],
)
def test_infra_errors(log: str, kwargs: dict[str, Any], reason: str) -> None:
    v = grade_swebench(log, ["t.py::f2p"], [], **kwargs)
    assert v.infra_error is not None and reason in v.infra_error
    assert not v.resolved and v.reward == 0.0


def test_plain_log_grades_by_default() -> None:
    """No markers: the whole log is read (swebench 2.x logs, other harnesses)."""
    log = "PASSED t.py::f2p\nFAILED t.py::p2p - x\n===== 1 failed, 1 passed in 0.1s =====\n"
    assert grade_swebench(log, ["t.py::f2p"], []).resolved
    assert grade_swebench(log, ["t.py::f2p"], ["t.py::p2p"]).status is ResolvedStatus.NO


CRASHES = {
    "syntax": (
        "ImportError while importing test module '/testbed/tests/test_x.py'.\n"
        'Traceback:\n  File "/testbed/pkg/mod.py", line 3\n    def f(:\n'
        "          ^\nE   SyntaxError: invalid syntax\n",
        "SyntaxError: invalid syntax",
    ),
    "conftest": (
        "ImportError while loading conftest '/testbed/conftest.py'.\n"
        "conftest.py:1: in <module>\n    import nope\n"
        "E   ModuleNotFoundError: No module named 'nope'\n",
        "ModuleNotFoundError: No module named 'nope'",
    ),
    "python_m": (
        'Traceback (most recent call last):\n  File "<frozen runpy>", line 198\n'
        "ImportError: cannot import name 'a' from partially initialized module 'pkg'\n",
        "ImportError: cannot import name 'a' from partially initialized module 'pkg'",
    ),
}


@pytest.mark.parametrize("name", sorted(CRASHES))
def test_a_crash_is_a_zero_with_its_reason_not_infra(name: str) -> None:
    body, line = CRASHES[name]
    for kwargs in ({}, {"patch": "diff --git a/x b/x\n"}, {"compat": "swebench"}):
        v = grade_swebench(eval_log(body, 2), ["t.py::f2p"], [], **kwargs)  # type: ignore[arg-type]
        assert v.infra_error is None and not v.resolved and v.status is ResolvedStatus.NO
        assert v.rejected == f"the test run crashed before reporting a result: {line}"


def test_silent_exit_after_a_change_is_a_zero() -> None:
    """``os._exit(0)`` at import: the runner's banner, then nothing, exit code 0."""
    banner = "============================= test session starts ==============================\n"
    v = grade_swebench(eval_log(banner, 0), ["t.py::f2p"], [])
    assert v.rejected and "without reporting any result" in v.rejected
    v = grade_swebench(eval_log("", 0), ["t.py::f2p"], [], patch="diff --git a/x b/x\n")
    assert v.rejected and v.infra_error is None
    assert grade_swebench(eval_log("", 0), ["t.py::f2p"], []).infra_error  # nothing to go on
    v = grade_swebench("", ["t.py::f2p"], [], markers=True, patch="diff --git a/x b/x\n")
    assert v.rejected and "end-of-tests marker" in v.rejected


def test_conflicting_outcomes_count_as_the_worst() -> None:
    """An atexit hook printing PASSED after the runner's FAILED (and exiting 0)."""
    body = (
        "FAILED t.py::f2p - assert 1 == 2\nPASSED t.py::p2p\n"
        "========= 1 failed, 1 passed in 0.02s =========\nPASSED t.py::f2p\n"
    )
    v = grade_swebench(eval_log(body, 0), ["t.py::f2p"], ["t.py::p2p"])
    assert not v.resolved and v.conflicting == ["t.py::f2p"]
    assert v.rejected and v.rejected.startswith("log does not match the runner's summary")
    no_summary = body.replace("========= 1 failed, 1 passed in 0.02s =========\n", "")
    v = grade_swebench(eval_log(no_summary, 0), ["t.py::f2p"], ["t.py::p2p"])
    assert not v.resolved and v.conflicting == ["t.py::f2p"] and v.rejected is None
    assert v.tests[0].status is TestStatus.FAILED
    harness = grade_swebench(eval_log(body, 0), ["t.py::f2p"], ["t.py::p2p"], compat="swebench")
    assert harness.resolved  # the harness keeps the last line: fooled


def test_log_must_match_the_runners_summary() -> None:
    forged = "PASSED t.py::f2p\nPASSED t.py::p2p\n===== 1 failed, 1 passed in 0.1s =====\n"
    v = grade_swebench(eval_log(forged, 0), ["t.py::f2p"], ["t.py::p2p"])
    assert not v.resolved and v.rejected is not None
    assert v.rejected.startswith("log does not match the runner's summary")
    ok = "PASSED t.py::f2p\nPASSED t.py::p2p\n===== 2 passed, 1 warning in 0.1s =====\n"
    assert grade_swebench(eval_log(ok, 0), ["t.py::f2p"], ["t.py::p2p"]).resolved
    teardown = "PASSED t.py::f2p\nERROR t.py::f2p - x\n=== 1 passed, 1 error in 0.1s ===\n"
    v = grade_swebench(eval_log(teardown, 1), ["t.py::f2p"], [])
    assert v.rejected is None and not v.resolved and v.tests[0].status is TestStatus.ERROR
    no_ra = "FAILED t.py::p2p - x\n= 1 failed, 3 passed in 0.1s =\n"  # without -rA
    assert grade_swebench(eval_log(no_ra, 1), [], ["t.py::p2p"]).rejected is None
    assert grade_swebench(eval_log(forged, 0), ["t.py::f2p"], [], compat="swebench").resolved


def test_runner_that_reported_nothing_is_a_zero_not_infra() -> None:
    log = eval_log("===== 2 skipped in 0.01s =====", 0)
    v = grade_swebench(log, ["t.py::f2p"], [])
    assert v.infra_error is None and v.rejected is not None


def test_forged_passed_lines_with_failing_exit_code_are_rejected() -> None:
    v = grade_swebench(eval_log("PASSED t.py::f2p\nPASSED t.py::p2p", 1), ["t.py::f2p"], [])
    assert not v.resolved and v.rejected and "exited 1" in v.rejected
    v = grade_swebench(eval_log("PASSED t.py::f2p", None), ["t.py::f2p"], [], exit_code=2)
    assert v.rejected and v.exit_code == 2


def test_exit_code_printed_inside_the_region_is_ignored() -> None:
    body = "PASSED t.py::f2p\n>>>>> Test Exit Code: 0"
    v = grade_swebench(eval_log(body, 1), ["t.py::f2p"], [])
    assert v.rejected and v.exit_code == 1


def test_glued_status_token_is_ignored() -> None:
    """Intended difference: the harness would record status 'PASSEDX' (neither list)."""
    v = grade_swebench(eval_log("PASSEDX t.py::f2p", 0), ["t.py::f2p"], [])
    assert not v.resolved


def test_timeout_code_is_rejected() -> None:
    v = grade_swebench(eval_log(SUITE) + "\n>>>>> Tests Timed Out\n", ["t.py::f2p"], [])
    assert v.rejected == "tests timed out" and v.infra_error is None


def test_stdout_and_stderr_concatenated_still_grade() -> None:
    log = corpus_log("pytest_rA_separate_streams")
    v = grade_swebench(log, ["tests/test_basic.py::test_pass"], ["tests/test_basic.py::test_skip"])
    assert v.resolved is False  # SKIPPED [1] summary: test_skip has no id -> failed P2P
    v = grade_swebench(log, ["tests/test_basic.py::test_pass"], ["tests/test_basic.py::test_fail"])
    assert v.status is ResolvedStatus.NO
    v = grade_swebench(log, ["tests/test_basic.py::test_param[a"], [])  # truncated by pytest parser
    assert v.resolved and v.exit_code == 1


def test_swesmith_guards() -> None:
    log = eval_log(SUITE, 1)
    assert grade_swesmith(log, ["t.py::f2p"], ["t.py::p2p"]).resolved
    v = grade_swesmith(log, ["t.py::f2p"], ["t.py::p2p"], patch="  \n")
    assert not v.resolved and v.rejected and "no change" in v.rejected
    with pytest.raises(InvalidTaskError, match="no FAIL_TO_PASS"):
        grade_swesmith(log, [], ["t.py::p2p"])


def test_bad_parser_name_fails_before_grading() -> None:
    with pytest.raises(LookupError, match="unknown log parser 'nope'"):
        grade_swebench(eval_log(SUITE), ["a"], [], log_parser="nope")


def test_readme_example_grades_a_plain_log_as_written() -> None:
    import re
    from pathlib import Path

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    match = re.search(r'log = """\\\n(.*?)"""', readme, re.DOTALL)
    assert match is not None
    verdict = grade_swebench(
        match.group(1),
        fail_to_pass=["tests/test_x.py::test_bug"],
        pass_to_pass=["tests/test_x.py::test_ok"],
        log_parser="pytest",
    )
    assert verdict.resolved and verdict.rejected is None
