"""Parsers for unittest-style runners: Django's ``runtests.py`` and ``python -m unittest -v``.

Django runs unittest's verbose runner (``test_x (module.Class[.test_x]) ... ok``); the
harness's reading of it, quirks included, is reproduced here because the gold
FAIL_TO_PASS / PASS_TO_PASS ids were produced by it.
"""

from __future__ import annotations

import re

from patchgym_rewards.status import StatusMap, TestStatus, new_status_map

_PASS_ENDINGS = (" ... ok", " ... OK", " ...  OK")
_MIGRATION_NOISE = "Applying sites.0002_alter_domain_unique...test_no_migrations"
_VERSION_TEST = "--version is equivalent to version"
# Django sometimes prints a multi-line message between "... " and "ok"; these are
# the three shapes seen in SWE-bench logs, read against the whole log.
_INTERRUPTED = tuple(
    re.compile(pattern, re.MULTILINE)
    for pattern in (
        r"^(.*?)\s\.\.\.\sTesting\ against\ Django\ installed\ in\ ((?s:.*?))\ silenced\)\.\nok$",
        r"^(.*?)\s\.\.\.\sInternal\ Server\ Error:\ \/(.*)\/\nok$",
        r"^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$",
    )
)


def parse_django(text: str, *, worst: bool = False) -> StatusMap:
    """Django / unittest verbose output (``<test> ... ok|FAIL|ERROR|skipped``).

    ``FAIL: <test>`` / ``ERROR: <test>`` headers also mark a test, and a bare ``ok``
    line closes the last ``<test> ...`` line whose output was interrupted.
    """
    status_map = new_status_map(worst)
    last_started: str | None = None
    for raw in text.split("\n"):
        line = raw.strip()
        if _VERSION_TEST in line:
            status_map[_VERSION_TEST] = TestStatus.PASSED
        if " ... " in line:
            last_started = line.split(" ... ", 1)[0]
        for ending in _PASS_ENDINGS:
            if line.endswith(ending):
                if line.startswith(_MIGRATION_NOISE):
                    line = line.split("...", 1)[-1].strip()
                status_map[line.rsplit(ending, 1)[0]] = TestStatus.PASSED
                break
        if " ... skipped" in line:
            status_map[line.split(" ... skipped", 1)[0]] = TestStatus.SKIPPED
        if line.endswith(" ... FAIL"):
            status_map[line.split(" ... FAIL", 1)[0]] = TestStatus.FAILED
        if line.startswith("FAIL:") and len(tokens := line.split()) > 1:
            status_map[tokens[1]] = TestStatus.FAILED
        if line.endswith(" ... ERROR"):
            status_map[line.split(" ... ERROR", 1)[0]] = TestStatus.ERROR
        if line.startswith("ERROR:") and len(tokens := line.split()) > 1:
            status_map[tokens[1]] = TestStatus.ERROR
        if line.startswith("ok") and last_started is not None:
            status_map[last_started] = TestStatus.PASSED
    for pattern in _INTERRUPTED:
        for match in pattern.finditer(text):
            status_map[match.group(1)] = TestStatus.PASSED
    return status_map


def parse_unittest(text: str, *, worst: bool = False) -> StatusMap:
    """Plain ``python -m unittest -v`` output; the same reading as Django's runner."""
    return parse_django(text, worst=worst)
