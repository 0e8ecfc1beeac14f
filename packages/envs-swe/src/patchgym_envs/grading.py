"""The one module that talks to patchgym-rewards (so API drift is a one-file fix).

A task's grading fields become a :class:`patchgym_rewards.GradingPlan`; the plan stages
the hidden tests in the sandbox only when grading runs, after the agent is done.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from patchgym_envs.errors import RowError
from patchgym_envs.task import Task
from patchgym_rewards import (
    GradingPlan,
    InvalidTaskError,
    ResolvedStatus,
    UnknownParserError,
    Verdict,
    load_reward_config,
    parser_for_repo,
    shape,
)
from patchgym_rewards.gitreads import reads_outside_head
from patchgym_rewards.gitsafe import CLEAN_CONFIG, GIT, TAMPERED, tampered
from patchgym_rewards.integrity import runner_absent
from patchgym_rewards.r2e import load_expected
from patchgym_rewards.sandbox import SandboxLike
from patchgym_rewards.verdict import HackFlag

log_ = logging.getLogger(__name__)

__all__ = [
    "CLEAN_CONFIG",
    "GIT",
    "TAMPERED",
    "HackFlag",
    "ResolvedStatus",
    "Verdict",
    "check_expected_output",
    "check_reward_config",
    "grade",
    "grade_logged",
    "keep_log",
    "parser_for",
    "plan_for",
    "reads_git_outside_head",
    "runner_absent",
    "shaped",
    "tampered",
]


def reads_git_outside_head(value: Any) -> bool:
    """Any text in a tool call's arguments reads git refs or objects beyond HEAD.

    A training signal (:attr:`HackFlag.GIT_OUTSIDE_HEAD`), not a defence: the sandbox's
    ``.git`` holds only the base history anyway (see ``gitclean``).
    """
    if isinstance(value, str):
        return reads_outside_head(value)
    if isinstance(value, Mapping):
        return any(reads_git_outside_head(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(reads_git_outside_head(v) for v in value)
    return False


def parser_for(repo: str) -> str:
    """The log parser name SWE-bench uses for ``repo`` (pytest when it is not listed)."""
    try:
        return parser_for_repo(repo)
    except UnknownParserError:
        return "pytest"


def check_expected_output(expected_output_json: str, *, field: str) -> None:
    """Reject an ``expected_output_json`` the R2E grader could not use."""
    try:
        load_expected(expected_output_json)
    except (InvalidTaskError, ValueError) as exc:
        raise RowError(field, str(exc)) from None


def plan_for(task: Task) -> GradingPlan:
    """The grading plan of ``task`` (pure data)."""
    return GradingPlan(
        grader=task.grader,
        base_commit=task.base_commit,
        test_files=list(task.test_files) if task.stage_test_patch else [],
        new_test_files=list(task.new_test_files) if task.stage_test_patch else [],
        test_patch=task.test_patch if task.stage_test_patch else "",
        hidden_files=dict(task.hidden_files),
        eval_script=task.eval_script,
        log_parser=task.log_parser,
        fail_to_pass=list(task.fail_to_pass),
        pass_to_pass=list(task.pass_to_pass),
        expected_output_json=task.expected_output_json,
        timeout=task.eval_timeout,
        plugin_autoload=task.plugin_autoload,
    )


async def grade(task: Task, sandbox: SandboxLike, *, patch: str | None = None) -> Verdict:
    """Run the task's plan in ``sandbox`` (hidden tests staged now) and return the verdict."""
    return await plan_for(task).grade(sandbox, patch=patch)


async def grade_logged(
    task: Task, sandbox: SandboxLike, *, patch: str | None = None
) -> tuple[Verdict, str]:
    """:func:`grade`, and the test log it read ("" when the run never started)."""
    plan = plan_for(task)
    run = await plan.run(sandbox)
    if isinstance(run, Verdict):
        return run, ""
    verdict = plan.grade_run(run, patch=patch)
    if run.reverted:
        verdict = verdict.model_copy(update={"reverted": run.reverted})
    return verdict, run.log


def keep_log(path: Path, log: str) -> bool:
    """Write a grading's test log, gzip-compressed (the folder is made). Best effort: a
    log that cannot be written (a full disk) is left out whole, never half-written, and
    never fails the grading it records; False then."""
    made = not path.parent.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(log.encode("utf-8", "surrogateescape")))
    except OSError as exc:
        log_.debug("grading log not kept at %s: %s", path, exc.strerror or exc)
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
            if made:
                path.parent.rmdir()
        return False
    return True


def check_reward_config(config: Mapping[str, Any]) -> None:
    """Fail early (at env construction) on a bad shaped-reward config."""
    load_reward_config(dict(config))


def shaped(
    verdict: Verdict, config: Mapping[str, Any], *, steps: int, format_errors: int
) -> Verdict:
    """The verdict with ``shaped_reward`` set per ``config`` (``{"type": "debug_gym", ...}``)."""
    return shape(
        verdict, load_reward_config(dict(config)), steps=steps, format_errors=format_errors
    )
