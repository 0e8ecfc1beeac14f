"""Does a test log describe one honest run? Runner summaries and crash evidence.

Two readings a parser alone cannot give:

- :func:`summary_mismatch` — pytest ends every run with ``N failed, M passed in Xs``.
  The result lines (``PASSED <id>`` ...) of the same text must add up to it; lines a
  patch printed itself (an ``atexit`` hook, a fake runner) or a runner whose output was
  filtered do not.
- :func:`crash_line` — when a run reported no result at all, the line that says why
  (``SyntaxError: invalid syntax``, ``ImportError while loading conftest``), so a
  crash the patch caused is graded 0 with its reason instead of masked as infra.
"""

from __future__ import annotations

import re
from collections import Counter, deque

# "=== 1 failed, 2 passed, 1 warning in 0.12s ===", "2 passed in 0.01 seconds" (-q,
# old pytest), "=== 1 passed, 1 error in 1.2s (0:00:01) ===".
_SUMMARY = re.compile(
    r"^(?:=+ )?((?:\d+ [a-z]+(?:, )?)+) in [\d.]+ ?s(?:econds)?(?: \([^)]*\))?(?: =+)?$",
    re.MULTILINE,
)
_COUNT = re.compile(r"(\d+) ([a-z]+)")
_RESULT_LINE = re.compile(r"^(PASSED|FAILED|ERROR) (?!\[\d+\])\S", re.MULTILINE)
_WORDS = {"passed": "PASSED", "failed": "FAILED", "error": "ERROR", "errors": "ERROR"}

PYTEST_PARSERS = frozenset(
    {
        "pytest",
        "pytest_options",
        "matplotlib",
        "astroid",
        "flask",
        "marshmallow",
        "pvlib",
        "pyvista",
        "sqlfluff",
        "xarray",
        "pydicom",
        "requests",
        "pylint",
    }
)
"""Parsers reading ``pytest -rA`` short-summary lines, whose counts the summary checks."""

MISMATCH = "log does not match the runner's summary"


_SHORT_SUMMARY = re.compile(r"^=+ short test summary info =+$", re.MULTILINE)


_WALK_LIMIT = 10_000


def _last_line(
    text: str, pattern: re.Pattern[str], needle: str, begin: int = 0, end: int | None = None
) -> re.Match[str] | None:
    """The last line of ``text[begin:end]`` that ``pattern`` matches whole (``begin`` is a
    line start).

    Walks back from ``end`` through the occurrences of ``needle`` (a literal every match
    contains), so a 50 MB log costs a few ``rfind`` calls, not a regex pass over it all.
    A text dense with ``needle`` and no match near its end (a flood) gets the regex pass
    over what is left after ``_WALK_LIMIT`` lines: never slower than that pass alone.
    """
    pos = len(text) if end is None else end
    for _ in range(_WALK_LIMIT):
        hit = text.rfind(needle, begin, pos)
        if hit < 0:
            return None
        start = max(begin, text.rfind("\n", 0, hit) + 1)
        stop = text.find("\n", hit, pos)
        match = pattern.fullmatch(text, start, pos if stop < 0 else stop)
        if match is not None:
            return match
        pos = start
    rest = deque(pattern.finditer(text, begin, pos), maxlen=1)
    return rest[0] if rest else None


def outer_summary(text: str, begin: int = 0, end: int | None = None) -> tuple[int, int, str] | None:
    """``(section start, summary start, counts)`` of pytest's own final summary line.

    The outer run's summary is the last summary line of the text: a suite that runs
    pytest inside its tests (pytest's own repository) prints inner summaries and inner
    ``PASSED`` lines in captured output *before* it. The section is the text from the
    last ``short test summary info`` header before that line (the whole text up to it
    when there is none). ``begin``/``end``: read only that region of ``text`` (no copy).
    """
    last = _last_line(text, _SUMMARY, " in ", begin, end)
    if last is None:
        return None
    header = _last_line(text, _SHORT_SUMMARY, "short test summary info", begin, last.start())
    return (begin if header is None else header.end()), last.start(), last.group(1)


def _totals(counts: str) -> Counter[str]:
    totals: Counter[str] = Counter()
    for number, word in _COUNT.findall(counts):
        if word in _WORDS:
            totals[_WORDS[word]] += int(number)
    return totals


def summary_counts(text: str) -> Counter[str] | None:
    """PASSED/FAILED/ERROR totals of pytest's final summary line of ``text``; None if none."""
    found = outer_summary(text)
    return None if found is None else _totals(found[2])


def summary_mismatch(text: str, begin: int = 0, end: int | None = None) -> str | None:
    """Why the ``-rA`` result lines of ``text[begin:end]`` disagree with pytest's summary,
    or None (the region is read in place: ``begin`` a line start, ``end`` a line end).

    Only the outer run counts: its final summary line and the result lines from its
    own short-summary section on (nested runs' lines in captured output before it are
    not counted; lines printed after the final summary are).
    Counted per line (a test that passed and then errored in teardown is one
    ``PASSED`` and one ``ERROR`` line, and ``1 passed, 1 error`` in the summary).
    FAILED and ERROR lines must match exactly (pytest always lists them); PASSED lines
    must match whenever there are any (without ``-rA`` there are none to count).
    """
    found = outer_summary(text, begin, end)
    if found is None:
        return None
    expected = _totals(found[2])
    lines = Counter(
        _RESULT_LINE.findall(text, found[0], len(text) if end is None else end)
    )  # and any printed after it
    for status in ("FAILED", "ERROR", "PASSED"):
        if status == "PASSED" and lines[status] == 0:
            continue
        if lines[status] != expected[status]:
            return (
                f"{MISMATCH}: {lines[status]} {status} line(s), the summary says {expected[status]}"
            )
    return None


# A runner that started (its banner), even if it never reported.
RUNNER_STARTED = re.compile(
    r"^=+ test session starts =+$"
    r"|^Testing against Django installed in"
    r"|^=+ test process starts =+$",
    re.MULTILINE,
)

_EXCEPTION = re.compile(
    r"^(?:E +)?((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b(?::.*)?)$",
    re.MULTILINE,
)
_PYTEST_CRASH = re.compile(
    r"^(ImportError while (?:loading conftest|importing test module) .*)$"
    r"|^!+ (Interrupted: .*?) !+$"
    r"|^(ERROR: .*)$"
    r"|^(.*: error: .*)$",
    re.MULTILINE,
)
# The eval script's runner is not there: the image's fault unless the patch removed it.
_RUNNER_ABSENT = re.compile(
    r"^(\S*python[\d.]*: No module named \S+)$|^(.*: command not found)$", re.MULTILINE
)


def runner_absent(text: str) -> str | None:
    """The line saying the eval script's runner does not exist (``No module named pytest``)."""
    match = _RUNNER_ABSENT.search(text)
    return None if match is None else next(g for g in match.groups() if g).strip()[:300]


CRASHED = "the test run crashed before reporting a result"
"""The reason of a 0 whose run named no test result, before its :func:`crash_line` (every
grader words it alike)."""


def crash_line(text: str) -> str | None:
    """The line that best says why a run reported nothing, or None.

    The first exception line (``SyntaxError: invalid syntax``, ``E   ImportError: ...``)
    wins; else a runner's own error line (``ImportError while loading conftest``,
    ``ERROR: usage ...``); see :func:`runner_absent` for a missing runner.
    """
    match = _EXCEPTION.search(text)
    if match is not None:
        return match.group(1).strip()[:300]
    match = _PYTEST_CRASH.search(text)
    if match is not None:
        return next(g for g in match.groups() if g).strip()[:300]
    return None


__all__ = [
    "CRASHED",
    "MISMATCH",
    "PYTEST_PARSERS",
    "RUNNER_STARTED",
    "crash_line",
    "outer_summary",
    "runner_absent",
    "summary_counts",
    "summary_mismatch",
]
