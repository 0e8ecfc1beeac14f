"""Tell a test that failed because it needed the network from one that is broken.

pytest's ``-rA`` short summary gives each failure's exception message (``FAILED id -
URLError: ...``); a failure whose message names a network error is a test-time download,
which sandboxes without network cannot serve. Data fetched at import time fails before
any test runs (pydicom warns "A download failure occurred" and the test later sees
``None``): when the log shows such an error anywhere, the tests that failed under the
gold patch are put down to it, with that line as the evidence.
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


def network_failures(log: str, tests: Iterable[str] | None = None) -> dict[str, str]:
    """Failed tests (restricted to ``tests`` when given) whose failure names a network error."""
    wanted = set(tests) if tests is not None else None
    out: dict[str, str] = {}
    evidence = ""
    for line in log.splitlines():
        m = SUMMARY.match(line.strip())
        if not m:
            if not evidence and NETWORK_ERRORS.search(line):
                evidence = line.strip()[:200]
            continue
        test, message = m.group(1), m.group(2) or ""
        if (wanted is None or test in wanted) and NETWORK_ERRORS.search(message):
            out[test] = message[:200]
    if evidence and wanted:
        out.update({t: f"log shows: {evidence}" for t in sorted(wanted) if t not in out})
    return out
