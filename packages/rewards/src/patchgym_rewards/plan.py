"""What to run at grading time, and running it through the sandbox protocol.

Hidden tests and the eval script enter the sandbox only here, after the agent is
done. Before they do, the diff policy (:mod:`patchgym_rewards.policy`) resets every
change that steers the runner (``conftest.py``, ini files, pytest sections, ``.pth``,
runner-named packages, test files) to the base commit, so neither a ``conftest.py``
that skips everything nor an edited test file can change the verdict. pytest runs
with plugin autoloading off unless the task says its suite needs its plugins.
"""

from __future__ import annotations

import logging
import re
import shlex
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from patchgym_rewards.errors import UnknownParserError
from patchgym_rewards.markers import END_TEST_OUTPUT, START_TEST_OUTPUT, TEST_EXIT_CODE
from patchgym_rewards.parsers import get_parser
from patchgym_rewards.policy import PolicyError, revert_steering
from patchgym_rewards.r2e import grade_r2e
from patchgym_rewards.sandbox import ExecResultLike, SandboxLike
from patchgym_rewards.status import EvalType, ResolvedStatus
from patchgym_rewards.swebench import grade_swebench
from patchgym_rewards.swesmith import grade_swesmith
from patchgym_rewards.verdict import Verdict

log = logging.getLogger(__name__)


class GradedRun(BaseModel):
    """The raw material of a verdict: the log and how the test command ended."""

    model_config = ConfigDict(frozen=True)

    log: str
    exit_code: int = Field(description="exit status of the whole eval script")
    test_exit_code: int | None = Field(
        default=None,
        description="the test command's own status when the plan knows it; else read from the log",
    )
    timed_out: bool = False
    truncated: bool = False
    duration_s: float = 0.0
    reverted: list[str] = Field(default_factory=list, description="paths the diff policy reset")


class GradingPlan(BaseModel):
    """Per-task grading recipe (pure data: it can be stored in a dataset row).

    ``eval_script`` is bash run from the workdir whose exit status is the test
    command's (``pytest -rA tests/test_x.py``); the plan wraps it in the SWE-bench
    start/end markers and takes its exit code from the sandbox. A full harness eval
    script (one that prints the start marker itself) runs unwrapped, and the test
    exit code it records after the end marker is used instead.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    grader: Literal["swebench", "swesmith", "r2e"] = "swebench"
    base_commit: str | None = Field(
        default=None, description="commit the test files are reset to (None: no reset)"
    )
    test_files: list[str] = Field(
        default_factory=list, description="existing test files the hidden tests modify"
    )
    new_test_files: list[str] = Field(
        default_factory=list, description="files the hidden tests create (removed first)"
    )
    test_patch: str = Field(default="", description="hidden test diff, applied with git apply")
    hidden_files: dict[str, str] = Field(
        default_factory=dict, description="hidden files to write (path -> content)"
    )
    eval_script: str
    log_parser: str = "pytest"
    eval_type: EvalType = EvalType.PASS_AND_FAIL
    fail_to_pass: list[str] = Field(default_factory=list)
    pass_to_pass: list[str] = Field(default_factory=list)
    expected_output_json: str | None = Field(default=None, description="R2E-Gym grader only")
    timeout: float = Field(default=1800.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    clean_collection_files: bool = True
    """Apply the diff policy before staging (see :mod:`patchgym_rewards.policy`)."""
    revert_test_files: bool = True
    """The policy also resets visible test files (``tests/``, ``test_*.py``)."""
    plugin_autoload: bool = False
    """Let pytest load installed plugins (``pytest11`` entry points): only for suites
    that need them; off sets ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` for the eval script."""

    @model_validator(mode="after")
    def _grader_has_its_data(self) -> GradingPlan:
        if self.grader == "r2e" and self.expected_output_json is None:
            raise ValueError("GradingPlan(grader='r2e') needs expected_output_json")
        if self.grader != "r2e":
            try:
                get_parser(self.log_parser)
            except UnknownParserError as exc:
                raise ValueError(str(exc)) from None
        return self

    async def run(self, sandbox: SandboxLike) -> GradedRun | Verdict:
        """Stage hidden tests, run the eval script; an infra ``Verdict`` if staging failed.

        Files the test patch touches are reset (or, when it creates them, removed)
        whether or not ``test_files`` / ``new_test_files`` list them, so an agent
        cannot make the hidden patch fail to apply by editing its targets.
        """
        modified, created = patch_files(self.test_patch)
        to_reset = _unique([*self.test_files, *modified])
        to_remove = _unique([*self.new_test_files, *created])
        reverted: list[str] = []
        if self.clean_collection_files:
            try:
                reverted = await revert_steering(
                    sandbox, self.base_commit, tests=self.revert_test_files
                )
            except PolicyError as exc:
                return _infra(str(exc), exc.result)
        if self.base_commit and to_reset:
            reset = await sandbox.exec(
                f"git checkout {shlex.quote(self.base_commit)} -- {_quote_all(to_reset)}"
            )
            if reset.exit_code != 0:
                return _infra("resetting test files to the base commit failed", reset)
        if to_remove:
            await sandbox.exec(f"rm -rf -- {_quote_all(to_remove)}")
        for path, content in self.hidden_files.items():
            await sandbox.write_file(path, content)
        if self.test_patch.strip():
            applied = await sandbox.exec("git apply -v -", stdin=_with_newline(self.test_patch))
            if applied.exit_code != 0:
                return _infra("the hidden test patch did not apply", applied)
        wrapped = START_TEST_OUTPUT not in self.eval_script
        script = wrap_eval_script(self.eval_script) if wrapped else self.eval_script
        env = dict(self.env)
        if not self.plugin_autoload:
            env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        result = await sandbox.exec(script, timeout=self.timeout, env=env or None)
        return GradedRun(
            log=result.output or result.stdout + result.stderr,
            exit_code=result.exit_code,
            test_exit_code=result.exit_code if wrapped else None,
            timed_out=result.timed_out or result.idle_timed_out,
            truncated=result.truncated,
            duration_s=result.duration_s,
            reverted=reverted,
        )

    def grade_run(self, run: GradedRun, *, patch: str | None = None) -> Verdict:
        """Grade a finished run with this plan's grader."""
        if run.timed_out:
            return Verdict(
                resolved=False,
                status=ResolvedStatus.NO,
                reward=0.0,
                rejected=f"eval script timed out after {self.timeout:g}s",
                exit_code=run.exit_code,
            )
        if self.grader == "r2e":
            assert self.expected_output_json is not None  # checked by the validator
            return grade_r2e(run.log, self.expected_output_json, patch=patch)
        if self.grader == "swesmith":
            return grade_swesmith(
                run.log,
                self.fail_to_pass,
                self.pass_to_pass,
                patch=patch,
                log_parser=self.log_parser,
                exit_code=run.test_exit_code,
            )
        return grade_swebench(
            run.log,
            self.fail_to_pass,
            self.pass_to_pass,
            log_parser=self.log_parser,
            eval_type=self.eval_type,
            exit_code=run.test_exit_code,
            patch=patch,
        )

    async def grade(self, sandbox: SandboxLike, *, patch: str | None = None) -> Verdict:
        """Run the plan in ``sandbox`` and grade it (call once, after the agent is done)."""
        run = await self.run(sandbox)
        if isinstance(run, Verdict):
            return run
        verdict = self.grade_run(run, patch=patch)
        return verdict.model_copy(update={"reverted": run.reverted}) if run.reverted else verdict


def wrap_eval_script(script: str) -> str:
    """Surround ``script`` with the markers; exit with the test command's status.

    The exit status comes from the sandbox, not from the log, so lines the tests
    print cannot fake it.
    """
    return "\n".join(
        (
            f"echo '{START_TEST_OUTPUT}'",
            "(",
            script.rstrip("\n"),
            ")",
            "PATCHGYM_TEST_EXIT_CODE=$?",
            f"echo '{END_TEST_OUTPUT}'",
            f'echo "{TEST_EXIT_CODE}: $PATCHGYM_TEST_EXIT_CODE"',
            "exit $PATCHGYM_TEST_EXIT_CODE",
        )
    )


_DIFF_HEADER = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)
_NEW_FILE = re.compile(r"^--- /dev/null\n\+\+\+ b/(\S+)$", re.MULTILINE)


def patch_files(patch: str) -> tuple[list[str], list[str]]:
    """(files the diff modifies, files it creates), in order of appearance."""
    created = _NEW_FILE.findall(patch)
    touched = [b for _, b in _DIFF_HEADER.findall(patch)]
    return [p for p in _unique(touched) if p not in created], _unique(created)


def _unique(paths: list[str]) -> list[str]:
    return list(dict.fromkeys(paths))


def _quote_all(paths: list[str]) -> str:
    return " ".join(shlex.quote(p) for p in paths)


def _with_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def _infra(what: str, result: ExecResultLike) -> Verdict:
    tail = (result.output or result.stdout + result.stderr)[-2000:]
    reason = f"{what} (exit code {result.exit_code}): {tail.strip()}"
    log.error("grading infra error: %s", reason)
    return Verdict.infra(reason)
