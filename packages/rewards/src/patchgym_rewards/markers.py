"""The SWE-bench eval-log protocol: markers, bad codes and the recorded exit code.

The harness's eval script prints ``>>>>> Start Test Output`` / ``>>>>> End Test
Output`` around the test command (through ``set -x`` tracing of ``: '<marker>'``)
and, after the end marker, ``>>>>> Test Exit Code: <n>``.
"""

from __future__ import annotations

import re

START_TEST_OUTPUT = ">>>>> Start Test Output"
END_TEST_OUTPUT = ">>>>> End Test Output"
TEST_EXIT_CODE = ">>>>> Test Exit Code"
TEST_EXIT_CODE_VAR = "SWEBENCH_TEST_EXIT_CODE"
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
RESET_FAILED = ">>>>> Reset Failed"
TESTS_ERROR = ">>>>> Tests Errored"
TESTS_TIMEOUT = ">>>>> Tests Timed Out"
BAD_CODES = (APPLY_PATCH_FAIL, RESET_FAILED, TESTS_ERROR, TESTS_TIMEOUT)

_EXIT_CODE = re.compile(rf"{re.escape(TEST_EXIT_CODE)}:\s*(-?\d+)")

# Positive evidence that a runner executed at least one test even when a parser
# found nothing (fail-only JS parsers record failures only). Every count is >= 1:
# "Executed 0 of 0" is a runner that never ran.
SUITE_RAN = re.compile(
    "|".join(
        (
            r"Executed [1-9]\d* of \d+",
            r"TOTAL: [1-9]\d* (?:SUCCESS|FAILED)",
            r"[1-9]\d* passing",
            r"Tests:\s+[1-9]\d*",
            r"Test Suites:\s+(?:\d+ \w+, )*[1-9]\d* total",
            r"^# tests [1-9]\d*",
            r"[1-9]\d* specs?, \d+ failures?",
            r"': ok$",
        )
    ),
    re.MULTILINE,
)


# A runner that started and reported, even if no line named a test: pytest's final
# "=== 2 skipped in 0.01s ===" (also "no tests ran"), unittest's "Ran 3 tests in".
RUNNER_REPORTED = re.compile(
    r"^=+ .*\b(?:passed|failed|skipped|errors?|xfailed|xpassed|deselected|no tests ran)\b"
    r".* in [\d.]+s.*=+$"
    r"|^Ran \d+ tests? in [\d.]+s$"
    r"|tests finished: \d+ passed",
    re.MULTILINE,
)


_BAD_CODE = re.compile("|".join(re.escape(code) for code in BAD_CODES))


def bad_code(text: str) -> str | None:
    """A harness failure code present in the log (in ``BAD_CODES`` order), if any."""
    found = set(_BAD_CODE.findall(text))
    return next((code for code in BAD_CODES if code in found), None)


def has_markers(text: str) -> bool:
    return START_TEST_OUTPUT in text and END_TEST_OUTPUT in text


def test_output_span(text: str) -> tuple[int, int]:
    """``(begin, end)`` of the text between the first start marker and the next end marker.

    Mirrors ``content.split(START)[1].split(END)[0]``: a second start marker also
    ends the region. Call only when :func:`has_markers` is true.
    """
    begin = text.index(START_TEST_OUTPUT) + len(START_TEST_OUTPUT)
    again = text.find(START_TEST_OUTPUT, begin)
    region_end = again if again >= 0 else len(text)
    end = text.find(END_TEST_OUTPUT, begin, region_end)
    return begin, end if end >= 0 else region_end


def test_output(text: str) -> str:
    """The marked region of ``text`` as a string (see :func:`test_output_span`)."""
    begin, end = test_output_span(text)
    return text[begin:end]


MARKER_LEAD = ">>>>> "
_NEUTRAL = ">>>>>! "


def sealed(marker: str, nonce: str) -> str:
    """``marker`` carrying this run's ``nonce`` (what the grader's wrapper prints)."""
    return f"{marker} {nonce}"


def unseal(text: str, nonce: str) -> tuple[str, int]:
    """``text`` with every marker the tests printed neutralised and the grader's restored.

    Any ``>>>>> `` the test output holds (a forged end marker, a fake ``Patch Apply
    Failed`` code, a fake exit code) becomes ``>>>>>! `` and means nothing; the
    markers carrying ``nonce`` become the plain SWE-bench markers. Returns the text
    and how many unsealed markers were neutralised.
    """
    own = [sealed(m, nonce) for m in (START_TEST_OUTPUT, END_TEST_OUTPUT, TEST_EXIT_CODE)]
    count = text.count(MARKER_LEAD) - sum(text.count(m) for m in own)
    out = text.replace(MARKER_LEAD, _NEUTRAL)
    for marker in (START_TEST_OUTPUT, END_TEST_OUTPUT, TEST_EXIT_CODE):
        out = out.replace(sealed(marker, nonce).replace(MARKER_LEAD, _NEUTRAL, 1), marker)
    return out, max(count, 0)


def recorded_exit_code(text: str) -> int | None:
    """The exit code the eval script recorded after the end marker, or None.

    Only text after the last end marker is searched: an ``Exit Code: 0`` line
    printed by the tests themselves (inside the region) cannot stand in for it.
    """
    tail_start = text.rfind(END_TEST_OUTPUT)
    tail = text[tail_start:] if tail_start >= 0 else text
    matches = _EXIT_CODE.findall(tail)
    return int(matches[-1]) if matches else None


__all__ = [
    "APPLY_PATCH_FAIL",
    "BAD_CODES",
    "END_TEST_OUTPUT",
    "RESET_FAILED",
    "RUNNER_REPORTED",
    "START_TEST_OUTPUT",
    "SUITE_RAN",
    "TESTS_ERROR",
    "TESTS_TIMEOUT",
    "TEST_EXIT_CODE",
    "TEST_EXIT_CODE_VAR",
    "bad_code",
    "has_markers",
    "recorded_exit_code",
    "sealed",
    "test_output",
    "test_output_span",
    "unseal",
]
