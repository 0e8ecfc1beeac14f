"""Grade a SWE-smith task: every FAIL_TO_PASS and PASS_TO_PASS test must pass.

SWE-smith runs SWE-bench-style eval scripts (same markers), so the log is read by
:func:`patchgym_rewards.swebench.grade_swebench`. Two guards make "no change" never
score 1: an empty patch is rejected, and a task without FAIL_TO_PASS tests is refused.
"""

from __future__ import annotations

from collections.abc import Sequence

from patchgym_rewards.errors import InvalidTaskError
from patchgym_rewards.status import ResolvedStatus
from patchgym_rewards.swebench import grade_swebench
from patchgym_rewards.verdict import Verdict


def grade_swesmith(
    log: bytes | str,
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    *,
    patch: str | None = None,
    log_parser: str = "pytest",
    exit_code: int | None = None,
) -> Verdict:
    """Grade like SWE-bench, after refusing tasks/runs where doing nothing could win.

    ``patch`` is the agent's diff against the base commit when known; an empty one
    means no change was made, which cannot resolve a task.
    """
    if not fail_to_pass:
        raise InvalidTaskError(
            "SWE-smith task has no FAIL_TO_PASS tests: an unchanged repository would score 1"
        )
    if patch is not None and not patch.strip():
        return Verdict(
            resolved=False,
            status=ResolvedStatus.NO,
            reward=0.0,
            rejected="no change made: the patch is empty",
            exit_code=exit_code,
        )
    return grade_swebench(
        log, fail_to_pass, pass_to_pass, log_parser=log_parser, exit_code=exit_code, patch=patch
    )
