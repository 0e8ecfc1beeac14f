"""Parsers for pytest logs, one per variant the SWE-bench harness distinguishes.

Each function takes normalised text (see :mod:`patchgym_rewards.text`) and returns a
status map with the harness's semantics: the last line naming a test wins, and only
the five SWE-bench statuses are recorded (``XPASS`` lines are ignored, as upstream).
"""

from __future__ import annotations

import re

from patchgym_rewards.status import StatusMap, TestStatus, new_status_map

_STATUSES: dict[str, TestStatus] = {s.value: s for s in TestStatus}
# Anchored on a literal "\n" rather than "^" + MULTILINE: the regex engine then
# jumps from newline to newline instead of trying every position (~3x faster).
_SUMMARY_LINE = re.compile(r"\n(PASSED|FAILED|ERROR|SKIPPED|XFAIL)[^\S\n]+(\S+)")
_SKIP_COUNT = re.compile(r"\[\d+\]")
_OPTION = re.compile(r"(.*?)\[(.*)\]")
_BARE_COLOUR = re.compile(r"\[(\d+)m")
_CONTROL = str.maketrans("", "", "".join(chr(c) for c in range(1, 32)))


def _is_skip_count(status: str, name: str) -> bool:
    """``SKIPPED [3] path:line: reason`` is a summary count, not a test id."""
    return status == "SKIPPED" and _SKIP_COUNT.fullmatch(name) is not None


def _summary_line(line: str) -> tuple[TestStatus, str] | None:
    """The (status, id) of one ``-rA`` summary line, or None (exact, slow path)."""
    if line.startswith("FAILED"):
        line = line.replace(" - ", " ")
    tokens = line.split()
    if len(tokens) < 2 or tokens[0] not in _STATUSES:
        return None
    if _is_skip_count(tokens[0], tokens[1]):
        return None
    return _STATUSES[tokens[0]], tokens[1]


def _parse_pytest_lines(text: str, worst: bool = False) -> StatusMap:
    status_map = new_status_map(worst)
    for line in text.split("\n"):
        found = _summary_line(line)
        if found is not None:
            status_map[found[1]] = found[0]
    return status_map


def parse_pytest(
    text: str, start: int = 0, end: int | None = None, *, worst: bool = False
) -> StatusMap:
    """``pytest -rA`` short-summary lines: ``STATUS <id> [- message]``.

    A single regular-expression pass finds candidate lines, so a log of tracebacks
    and captured output costs almost nothing per line. ``start``/``end`` parse a
    region of ``text`` without copying it (``start`` is taken as a line start). The
    one case where the harness's ``" - "`` rewriting changes which token is the id
    (an id of ``-``) falls back to the exact line-by-line reading. ``worst=True``
    keeps a test's worst outcome instead of its last (see :class:`WorstMap`).
    """
    stop = len(text) if end is None else end
    statuses = _STATUSES
    status_map = new_status_map(worst)
    found = _SUMMARY_LINE.findall(text, start, stop)
    if text.startswith(("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL"), start, stop):
        eol = text.find("\n", start, stop)
        first = _SUMMARY_LINE.match("\n" + text[start : stop if eol < 0 else eol])
        if first is not None:
            found.insert(0, first.groups())
    for status, name in found:
        if status == "SKIPPED" and name[0] == "[" and _SKIP_COUNT.fullmatch(name):
            continue
        if name == "-" and status == "FAILED":
            return _parse_pytest_lines(text[start:stop], worst)
        status_map[name] = statuses[status]
    return status_map


def parse_pytest_options(text: str, *, worst: bool = False) -> StatusMap:
    """pytest ``-rA`` where parametrised ids may hold absolute paths (requests, pylint).

    ``test[/abs/dir/file]`` is keyed as ``test[/file]`` so ids do not depend on where
    the repository was checked out; anything after the last ``]`` is dropped.
    """
    status_map = new_status_map(worst)
    for name, status in parse_pytest(text, worst=worst).items():
        status_map[_strip_option_path(name)] = status
    return status_map


def _strip_option_path(name: str) -> str:
    match = _OPTION.search(name)
    if match is None:
        return name
    main, option = match.groups()
    if option.startswith("/") and not option.startswith("//") and "*" not in option:
        option = "/" + option.rsplit("/", 1)[-1]
    return f"{main}[{option}]"


def parse_pytest_v2(text: str, *, worst: bool = False) -> StatusMap:
    """Newer pytest logs (astropy, scikit-learn, sphinx): ``-rA`` lines *or* verbose lines.

    Ids may contain spaces (the whole rest of the line is the id; a FAILED line's
    ``" - message"`` is cut first), and ``<id> STATUS`` verbose lines of older pytest
    (classic console style) are read too. Stray colour codes and control characters
    are removed from each line first.
    """
    status_map = new_status_map(worst)
    for raw in text.split("\n"):
        line = _BARE_COLOUR.sub("", raw).translate(_CONTROL)
        if line.startswith(("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL")):
            if line.startswith("FAILED"):
                line = line.split(" - ", 1)[0]
            tokens = line.split()
            if (
                len(tokens) >= 2
                and tokens[0] in _STATUSES
                and not _is_skip_count(tokens[0], tokens[1])
            ):
                status_map[" ".join(tokens[1:])] = _STATUSES[tokens[0]]
        elif line.endswith(("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL")):
            tokens = line.split()
            if len(tokens) >= 2 and tokens[-1] in _STATUSES:
                status_map[" ".join(tokens[:-1])] = _STATUSES[tokens[-1]]
    return status_map


def parse_pytest_verbose(text: str, *, worst: bool = False) -> StatusMap:
    """pytest ``-v`` progress lines (``<id> STATUS [ 42%]``), for logs run without ``-rA``.

    Not a harness parser: SWE-bench always runs ``-rA``. Useful for R2E/SWE-Gym style
    scripts that only ran ``pytest -v``; ``-rA`` summary lines, when present, win.
    """
    status_map = new_status_map(worst)
    for line in text.split("\n"):
        tokens = line.split()
        if len(tokens) >= 2 and "::" in tokens[0]:
            last = tokens[-1]
            if last.endswith("%]") and len(tokens) >= 3:
                if tokens[-2] == "[":
                    tokens = tokens[:-1]
                tokens = tokens[:-1]
            if len(tokens) >= 2 and tokens[-1] in _STATUSES:
                status_map[" ".join(tokens[:-1])] = _STATUSES[tokens[-1]]
    for name, status in parse_pytest(text, worst=worst).items():
        status_map[name] = status
    return status_map


def parse_matplotlib(text: str, *, worst: bool = False) -> StatusMap:
    """``-rA`` lines with ``MouseButton.LEFT/RIGHT`` in ids rewritten to ``1``/``3``."""
    if "MouseButton." in text:
        text = text.replace("MouseButton.LEFT", "1").replace("MouseButton.RIGHT", "3")
    return parse_pytest(text, worst=worst)


def parse_seaborn(text: str, *, worst: bool = False) -> StatusMap:
    """seaborn's logs: ``FAILED <id>``, ``<id> PASSED ...`` or ``PASSED <id>`` only."""
    status_map = new_status_map(worst)
    for line in text.split("\n"):
        parts = line.split()
        if len(parts) < 2:
            continue
        if line.startswith("FAILED"):
            status_map[parts[1]] = TestStatus.FAILED
        elif " PASSED " in line:
            if parts[1] == "PASSED":
                status_map[parts[0]] = TestStatus.PASSED
        elif line.startswith("PASSED"):
            status_map[parts[1]] = TestStatus.PASSED
    return status_map
