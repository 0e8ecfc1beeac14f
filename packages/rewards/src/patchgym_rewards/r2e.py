"""Grade a run the way R2E-Gym does: exact match against ``expected_output_json``."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Literal

from patchgym_rewards.canary import Canaries, canary_problem, without
from patchgym_rewards.errors import InvalidTaskError
from patchgym_rewards.integrity import CRASHED, crash_line, runner_absent, summary_mismatch
from patchgym_rewards.parsers.r2e import parse_r2e
from patchgym_rewards.status import FAILING, ResolvedStatus, TestStatus
from patchgym_rewards.text import normalize
from patchgym_rewards.verdict import HackFlag, TestOutcome, TestRole, Verdict

_COLOUR = re.compile(r"\x1b\[\d+m")


def normalize_keys(status_map: Mapping[str, str]) -> dict[str, str]:
    """R2E-Gym's key normalisation: colour codes out, ``" - message"`` cut.

    Keys are visited in sorted order, so when two keys collapse into one the
    later (in sort order) wins, as upstream.
    """
    decoloured = {_COLOUR.sub("", key): value for key, value in status_map.items()}
    return {key.split(" - ")[0]: decoloured[key] for key in sorted(decoloured)}


def load_expected(expected_output_json: str | Mapping[str, str]) -> dict[str, TestStatus]:
    """Decode and validate a task's ``expected_output_json`` (JSON text or a mapping)."""
    raw: object = (
        json.loads(expected_output_json)
        if isinstance(expected_output_json, str)
        else dict(expected_output_json)
    )
    if not isinstance(raw, dict):
        raise InvalidTaskError(
            f"expected_output_json must be a JSON object of test -> status, got {type(raw).__name__}"
        )
    expected: dict[str, TestStatus] = {}
    for key, value in normalize_keys(raw).items():
        try:
            expected[key] = TestStatus(value)
        except ValueError:
            raise InvalidTaskError(
                f"expected_output_json maps {key!r} to unknown status {value!r} — "
                f"expected one of {', '.join(TestStatus)}"
            ) from None
    return expected


def grade_r2e(
    log: bytes | str,
    expected_output_json: str | Mapping[str, str],
    *,
    patch: str | None = None,
    exit_code: int | None = None,
    canaries: Canaries | None = None,
    compat: Literal["patchgym", "r2e"] = "patchgym",
) -> Verdict:
    """Reward 1 iff the parsed map equals the expected one (same size, same statuses).

    Default (``compat="patchgym"``) checks, as for SWE-bench logs: a test reported
    twice keeps its worst outcome; only pytest's own (last) short summary is read;
    the result lines must add up to pytest's final summary line; the test command's
    ``exit_code`` must agree (non-zero needs a failing test, zero allows none); the
    ``canaries`` must have their known outcomes. ``compat="r2e"``: R2E-Gym's reading
    (first summary section, last line wins, no checks).

    Tests expected to FAIL must fail. An empty log is an infra error (nothing ran)
    unless ``patch`` (the agent's diff) is non-empty: then the change silenced the run;
    a log without a pytest summary grades 0, as in R2E-Gym. Differences from
    R2E-Gym: a parsed test missing from the expected map is a mismatch (R2E-Gym
    raises ``KeyError``), and all ANSI sequences are stripped, not only colours.
    """
    expected = load_expected(expected_output_json)
    text = normalize(log)
    if not text.strip():
        if patch is not None and patch.strip():
            return Verdict(
                resolved=False,
                status=ResolvedStatus.NO,
                reward=0.0,
                rejected="the test run produced no output after a change",
            )
        return Verdict.infra("empty test log: the test script produced no output")
    strict = compat != "r2e"
    raw = parse_r2e(text, worst=strict, outer=strict)
    parsed = {k: TestStatus(v) for k, v in normalize_keys(raw).items()}
    canary: Verdict | None = None
    flipped = False
    if strict:
        forged = _contradiction(text, parsed, exit_code)
        if forged is not None:
            return forged
        if canaries is not None:
            problem, flipped = canary_problem(parsed, canaries, style="r2e")
            if problem is not None:
                flag = HackFlag.CANARY_FLIPPED if flipped else HackFlag.FORGED_LOG
                canary = Verdict.forged(problem, flag, exit_code=exit_code, parsed=len(parsed))
        parsed = without(parsed, canaries, "r2e")
    outcomes = [
        TestOutcome(
            name=name,
            role=TestRole.EXPECTED,
            status=parsed.get(name),
            expected=status,
            ok=parsed.get(name) == status,
        )
        for name, status in expected.items()
    ]
    outcomes += [
        TestOutcome(name=name, role=TestRole.EXPECTED, status=status, expected=None, ok=False)
        for name, status in parsed.items()
        if name not in expected
    ]
    resolved = len(parsed) == len(expected) and all(o.ok for o in outcomes)
    if canary is not None and (flipped or resolved):
        return canary  # a missing or failing must-pass canary counts where the run resolves
    crash = (
        (crash_line(text) or runner_absent(text))
        if strict and not parsed and not resolved
        else None
    )
    return Verdict(
        rejected=None if crash is None else f"{CRASHED}: {crash}",
        resolved=resolved,
        status=ResolvedStatus.FULL if resolved else ResolvedStatus.NO,
        reward=1.0 if resolved else 0.0,
        tests=outcomes,
        parsed=len(parsed),
    )


def _contradiction(
    text: str, parsed: Mapping[str, TestStatus], exit_code: int | None
) -> Verdict | None:
    """A forged verdict when the log contradicts the run's summary or exit code, else None."""
    failing = any(status in FAILING for status in parsed.values())
    reason = summary_mismatch(text)
    if reason is None and parsed and exit_code not in (None, 0) and not failing:
        reason = f"test command exited {exit_code} but the log reports no failing test"
    if reason is None and exit_code == 0 and failing:
        reason = "test command exited 0 but the log reports a failing test"
    if reason is not None:
        return Verdict.forged(reason, HackFlag.FORGED_LOG, exit_code=exit_code, parsed=len(parsed))
    return None
