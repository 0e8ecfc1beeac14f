"""Tell a test that failed because it needed the network from one that is broken.

pytest's ``-rA`` short summary gives each failure's exception message (``FAILED id -
URLError: ...``); a failure whose message names a network error is a test-time download,
which sandboxes without network cannot serve.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

NETWORK_ERRORS = re.compile(
    r"URLError|ConnectionError|ConnectTimeout|NewConnectionError|MaxRetryError|"
    r"Temporary failure in name resolution|Name or service not known|Network is unreachable|"
    r"nodename nor servname|getaddrinfo failed|socket\.gaierror|gaierror|"
    r"Connection refused|No route to host|HTTPSConnectionPool|urlopen error",
)
SUMMARY = re.compile(r"^(?:FAILED|ERROR) (\S+)(?: - (.*))?$")


def network_failures(log: str, tests: Iterable[str] | None = None) -> dict[str, str]:
    """Failed tests (restricted to ``tests`` when given) whose failure names a network error."""
    wanted = set(tests) if tests is not None else None
    out: dict[str, str] = {}
    for line in log.splitlines():
        m = SUMMARY.match(line.strip())
        if not m or not m.group(2):
            continue
        test, message = m.group(1), m.group(2)
        if (wanted is None or test in wanted) and NETWORK_ERRORS.search(message):
            out[test] = message[:200]
    return out
