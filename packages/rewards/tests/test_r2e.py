"""R2E-Gym grading: exact match of the parsed map against expected_output_json."""

from __future__ import annotations

import json

import pytest
from rewards_corpus import corpus_log

from patchgym_rewards import InvalidTaskError, TestStatus, grade_r2e, parse_log
from patchgym_rewards.r2e import normalize_keys

LOG = """
============================= test session starts ==============================
collected 4 items

r2e_tests/test_1.py ..F.                                                    [100%]
=========================== short test summary info ============================
PASSED r2e_tests/test_1.py::test_a
PASSED r2e_tests/test_1.py::TestK::test_b[x - y]
FAILED r2e_tests/test_1.py::test_c - AssertionError: nope
ERROR r2e_tests/test_1.py::test_d - RuntimeError
===================== 1 failed, 2 passed, 1 error in 0.01s ======================
"""
EXPECTED = {
    "test_a": "PASSED",
    "TestK.test_b[x": "PASSED",
    "test_c": "FAILED",
    "test_d": "ERROR",
}


def test_parser_drops_path_and_joins_with_dots() -> None:
    assert parse_log(LOG, "r2e") == {
        "test_a": TestStatus.PASSED,
        "TestK.test_b[x - y]": TestStatus.PASSED,
        "test_c": TestStatus.FAILED,
        "test_d": TestStatus.ERROR,
    }


def test_exact_match_including_expected_failures() -> None:
    v = grade_r2e(LOG, json.dumps(EXPECTED))
    assert v.resolved and v.reward == 1.0
    assert {t.name: t.expected for t in v.tests}["test_c"] is TestStatus.FAILED


def test_a_fixed_expected_failure_is_a_mismatch() -> None:
    assert not grade_r2e(LOG.replace("FAILED r2e", "PASSED r2e"), EXPECTED).resolved


def test_size_must_match() -> None:
    assert not grade_r2e(LOG, {**EXPECTED, "test_e": "PASSED"}).resolved
    fewer = dict(EXPECTED)
    del fewer["test_d"]
    v = grade_r2e(LOG, fewer)
    assert not v.resolved and any(t.expected is None for t in v.tests)


def test_key_normalisation_strips_colour_and_messages() -> None:
    assert normalize_keys({"\x1b[31mtest_a - msg\x1b[0m": "FAILED"}) == {"test_a": "FAILED"}


def test_no_summary_is_a_zero_and_empty_log_is_infra() -> None:
    v = grade_r2e("ImportError while loading conftest", EXPECTED)
    assert not v.resolved and v.infra_error is None
    assert grade_r2e(b"", EXPECTED).infra_error is not None


def test_invalid_expected_output() -> None:
    with pytest.raises(InvalidTaskError, match="unknown status 'OK'"):
        grade_r2e(LOG, {"test_a": "OK"})
    with pytest.raises(InvalidTaskError, match="JSON object"):
        grade_r2e(LOG, "[1, 2]")


def test_real_corpus_log() -> None:
    sm = parse_log(corpus_log("pytest_rA"), "r2e")
    assert sm["test_param[a b]"] is TestStatus.PASSED
    assert sm["TestClass.test_method_fail"] is TestStatus.FAILED
    assert "test_xfail" not in sm  # XFAIL/SKIPPED lines are not read by R2E
