"""Tell a test that failed because it needed the network from one that is broken.

A test is put down to the network only on its *own* evidence: its ``-rA`` short-summary
message (``FAILED id - URLError: ...``) or its own section of pytest's FAILURES/ERRORS
report (traceback, captured output) names a network error. A download warning elsewhere
in the log (pydicom warns "A download failure occurred" at import time) is evidence for
no test in particular and drops none: a test that then fails on ``None`` data is a
failure to look at, not to hide.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

NETWORK_ERRORS = re.compile(
    r"URLError|ConnectionError|ConnectTimeout|NewConnectionError|MaxRetryError|"
    r"Temporary failure in name resolution|Name or service not known|Network is unreachable|"
    r"nodename nor servname|getaddrinfo failed|socket\.gaierror|gaierror|"
    r"Connection refused|No route to host|HTTPSConnectionPool|urlopen error|"
    r"download failure|failed to download|could not download",
    re.IGNORECASE,
)
SUMMARY = re.compile(r"^(?:FAILED|ERROR) (\S+)(?: - (.*))?$")
BANNER = re.compile(r"^={5,} (.*?) ={5,}$")
HEADLINE = re.compile(r"^_{3,} (.+?) _{3,}$")
ERROR_AT = re.compile(r"^ERROR at (?:setup|teardown|call) of ")


def headline(test_id: str) -> str:
    """pytest's section headline for a node id: ``t.py::C::test[x]`` -> ``C.test[x]``."""
    parts = test_id.split("::")
    return ".".join(parts[1:]) if len(parts) > 1 else test_id


def failure_sections(log: str) -> dict[str, list[str]]:
    """Headline -> the lines of its section in the FAILURES and ERRORS reports."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    in_report = False
    for line in log.splitlines():
        stripped = line.strip()
        banner = BANNER.match(stripped)
        if banner:
            in_report = banner.group(1).strip() in ("FAILURES", "ERRORS")
            current = None
            continue
        if not in_report:
            continue
        head = HEADLINE.match(stripped)
        if head:
            name = ERROR_AT.sub("", head.group(1).strip())
            current = sections.setdefault(name, [])
            continue
        if current is not None:
            current.append(line)
    return sections


def network_failures(log: str, tests: Iterable[str] | None = None) -> dict[str, str]:
    """Failed tests (restricted to ``tests`` when given) whose own failure names a network
    error -> that line, the evidence."""
    wanted = set(tests) if tests is not None else None
    out: dict[str, str] = {}
    failed: list[str] = []
    for line in log.splitlines():
        m = SUMMARY.match(line.strip())
        if not m or (wanted is not None and m.group(1) not in wanted):
            continue
        test, message = m.group(1), m.group(2) or ""
        failed.append(test)
        if NETWORK_ERRORS.search(message):
            out[test] = message.strip()[:200]
    sections = failure_sections(log)
    for test in [*failed, *sorted(wanted or ())]:
        if test in out:
            continue
        for line in sections.get(headline(test), []):
            if NETWORK_ERRORS.search(line):
                out[test] = line.strip()[:200]
                break
    return out
