"""What to run at grading time, and running it through the sandbox protocol.

Hidden tests and the eval script enter the sandbox only here, after the agent is
done. In order:

1. the repository's git config is reset to its format keys (:mod:`~patchgym_rewards.gitsafe`)
   and every git command runs without hooks, filters, attributes or system/global config;
2. the diff policy (:mod:`patchgym_rewards.policy`) resets every change that steers the
   runner (``conftest.py``, ini files, pytest sections, ``.pth``, runner-named packages,
   new root modules named like the stdlib or an installed distribution, test files);
3. the hidden tests are staged, and two canary tests with random names (one must pass,
   one must fail) are appended to a hidden test file (:mod:`~patchgym_rewards.canary`);
4. the eval script runs between markers carrying a per-run nonce the tests never see,
   with the working directory moved behind the stdlib (:mod:`~patchgym_rewards.safepath`)
   and plugin autoloading off unless the task says its suite needs its plugins.

Grading then ignores markers without the nonce, rejects a truncated run, and rejects
a run whose canaries do not have their known outcomes. Everything the run shows the
policy tried is recorded in ``Verdict.flags``.
"""

from __future__ import annotations

import logging
import re
import secrets
import shlex
from dataclasses import dataclass
from functools import partial
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from patchgym_rewards.canary import Canaries, canary_host, make_canaries
from patchgym_rewards.errors import UnknownParserError
from patchgym_rewards.gitsafe import CLEAN_CONFIG, GIT, TAMPERED, tampered
from patchgym_rewards.integrity import PYTEST_PARSERS
from patchgym_rewards.markers import (
    END_TEST_OUTPUT,
    START_TEST_OUTPUT,
    TEST_EXIT_CODE,
    unseal,
)
from patchgym_rewards.parsers import get_parser
from patchgym_rewards.policy import (
    SECTION_FILES,
    STEERING_NAMES,
    STEERING_SUFFIXES,
    Changes,
    PolicyError,
    changes_command,
    is_test_path,
    parse_changes,
    revert_steering,
    runner_prefix,
)
from patchgym_rewards.r2e import grade_r2e
from patchgym_rewards.safepath import (
    SHADOW_QUERY,
    SITECUSTOMIZE,
    interpreter_of,
    shadow_names,
)
from patchgym_rewards.sandbox import ExecResultLike, SandboxLike
from patchgym_rewards.status import EvalType, ResolvedStatus
from patchgym_rewards.swebench import grade_swebench
from patchgym_rewards.swesmith import grade_swesmith
from patchgym_rewards.verdict import HackFlag, Verdict

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
    nonce: str | None = Field(default=None, description="the markers' nonce (wrapped scripts)")
    canaries: Canaries | None = None
    flags: list[HackFlag] = Field(default_factory=list, description="what staging found")


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
    canaries: bool = True
    """Append a must-pass and a must-fail test with random names to a hidden test file
    the eval script collects whole (pytest runners only; skipped when none is)."""
    safe_path: bool = True
    """Move the working directory behind the stdlib for ``python -m`` and revert new root
    modules named like the env's stdlib or installed distributions."""
    compat: Literal["patchgym", "swebench"] = "patchgym"
    """``swebench``: the harness's reading of the log (see ``grade_swebench``)."""

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
        flags: list[HackFlag] = []
        reverted: list[str] = []
        if not self.clean_collection_files:
            cleaned = (await sandbox.exec(CLEAN_CONFIG, timeout=120)).stdout
        else:
            try:
                cleaned, changes = await self._clean_and_list(sandbox)
                reverted = await revert_steering(
                    sandbox,
                    self.base_commit,
                    tests=self.revert_test_files,
                    changes=changes,
                    shadows=partial(self._shadows, sandbox) if self.safe_path else None,
                )
            except PolicyError as exc:
                return _infra(str(exc), exc.result)
        if tampered(cleaned):
            flags.append(HackFlag.GIT_TAMPERED)
        flags += [_flag_of(path) for path in reverted]
        steps: list[_Step] = []
        if self.base_commit and to_reset:
            reset = f"{GIT} checkout {shlex.quote(self.base_commit)} -- {_quote_all(to_reset)}"
            steps.append(_Step(reset, "resetting test files to the base commit failed"))
        if to_remove:
            steps.append(_Step(f"rm -rf -- {_quote_all(to_remove)}", None))
        apply = _Step(f"{GIT} apply -v -", "the hidden test patch did not apply", stdin=True)
        if self.hidden_files:  # written between the reset and the patch, as the task says
            failed = await _run_steps(sandbox, steps)
            if failed is not None:
                return failed
            steps = []
            for path, content in self.hidden_files.items():
                await sandbox.write_file(path, content)
        if self.test_patch.strip():
            steps.append(apply)
        failed = await _run_steps(sandbox, steps, stdin=_with_newline(self.test_patch))
        if failed is not None:
            return failed
        wrapped = START_TEST_OUTPUT not in self.eval_script
        # a full harness script resets and re-applies the tests itself: no canaries there
        planted = await self._plant_canaries(sandbox, [*to_reset, *to_remove]) if wrapped else None
        canaries = planted[0] if planted else None
        nonce = secrets.token_hex(12) if wrapped else None
        script = self.eval_script
        if wrapped:
            folder = f"/tmp/patchgym-grade-{secrets.token_hex(6)}" if self.safe_path else None
            script = wrap_eval_script(self.eval_script, nonce_stdin=True, pythonpath=folder)
        env = dict(self.env)
        if not self.plugin_autoload:
            env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        result = await sandbox.exec(
            script,
            timeout=self.timeout,
            env=env or None,
            stdin=None if nonce is None else nonce + "\n",  # read by the shell alone
        )
        if (
            nonce is not None
            and f"{START_TEST_OUTPUT} {nonce}" not in result.output + result.stdout
        ):
            return _infra("preparing the grading folder failed", result)
        if planted is not None:  # the staged hidden file as the task wrote it
            await sandbox.write_file(planted[0].host, planted[1])
        return GradedRun(
            log=result.output or result.stdout + result.stderr,
            exit_code=result.exit_code,
            test_exit_code=result.exit_code if wrapped else None,
            timed_out=result.timed_out or result.idle_timed_out,
            truncated=result.truncated,
            duration_s=result.duration_s,
            reverted=reverted,
            nonce=nonce,
            canaries=canaries,
            flags=sorted(set(flags)),
        )

    async def _clean_and_list(self, sandbox: SandboxLike) -> tuple[str, Changes]:
        """Run :data:`CLEAN_CONFIG`, then, in the same exec, list the agent's changes
        (:func:`~patchgym_rewards.policy.changes_command`): (CLEAN_CONFIG's output, the
        changes). Raises :class:`PolicyError` when the listing fails."""
        base = self.base_commit or "HEAD"
        both = await sandbox.exec(
            f"( {CLEAN_CONFIG} ) </dev/null\n{changes_command(base)}", timeout=240
        )
        head, marker, rest = both.stdout.partition(f"{TAMPERED}=")
        state, _, listing = rest.partition("\n")
        changes = parse_changes(listing) if marker and both.exit_code == 0 else None
        if changes is None:
            raise PolicyError("listing the agent's changes failed", both)
        return head + marker + state, changes

    async def _shadows(self, sandbox: SandboxLike) -> frozenset[str]:
        """Ask the eval script's Python (``python3`` when that one fails) for the names a
        new root module must not take (:data:`~patchgym_rewards.safepath.SHADOW_QUERY`)."""
        output = ""
        for python in dict.fromkeys((interpreter_of(self.eval_script), "python3")):
            asked = await sandbox.exec(
                f"{shlex.quote(python)} -I -", stdin=SHADOW_QUERY, timeout=120
            )
            if asked.exit_code == 0:
                output = asked.stdout
                break
        return shadow_names(output)

    def _canary_candidates(self, staged: list[str]) -> list[str]:
        if self.grader == "r2e":
            return [p for p in self.hidden_files if is_test_path(p) and p.endswith(".py")]
        if self.log_parser.removeprefix("parse_log_") not in PYTEST_PARSERS:
            return []
        named = [t.split("::")[0] for t in (*self.fail_to_pass, *self.pass_to_pass)]
        graded = _unique([p for p in named if p.endswith(".py")])
        return [p for p in graded if p in staged or p in self.hidden_files]

    async def _plant_canaries(
        self, sandbox: SandboxLike, staged: list[str]
    ) -> tuple[Canaries, str] | None:
        """Append the canaries to a collected hidden test file; (canaries, its old text)."""
        if not self.canaries:
            return None
        host = canary_host(self.eval_script, self._canary_candidates(staged))
        if host is None:
            return None
        try:
            text = (await sandbox.read_file(host)).decode("utf-8", errors="replace")
        except (OSError, ValueError):
            return None
        canaries = make_canaries(host)
        await sandbox.write_file(host, _with_newline(text) + canaries.source())
        return canaries, text

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
        flags = list(run.flags)
        log_text = run.log
        if run.nonce is not None:
            log_text, neutralised = unseal(log_text, run.nonce)
            if neutralised:
                flags.append(HackFlag.FORGED_LOG)
        if run.truncated:
            return Verdict.forged(
                "the test output was truncated: results in the dropped middle cannot be read",
                HackFlag.TRUNCATED,
                *flags,
                exit_code=run.exit_code,
            )
        return self._grade_text(log_text, run, patch).with_flags(*flags)

    def _grade_text(self, log_text: str, run: GradedRun, patch: str | None) -> Verdict:
        if self.grader == "r2e":
            assert self.expected_output_json is not None  # checked by the validator
            return grade_r2e(
                log_text,
                self.expected_output_json,
                patch=patch,
                exit_code=run.test_exit_code,
                canaries=run.canaries,
                compat="patchgym" if self.compat == "patchgym" else "r2e",
            )
        if self.grader == "swesmith":
            return grade_swesmith(
                log_text,
                self.fail_to_pass,
                self.pass_to_pass,
                patch=patch,
                log_parser=self.log_parser,
                exit_code=run.test_exit_code,
            )
        return grade_swebench(
            log_text,
            self.fail_to_pass,
            self.pass_to_pass,
            log_parser=self.log_parser,
            eval_type=self.eval_type,
            exit_code=run.test_exit_code,
            patch=patch,
            compat=self.compat,
            canaries=run.canaries,
        )

    async def grade(self, sandbox: SandboxLike, *, patch: str | None = None) -> Verdict:
        """Run the plan in ``sandbox`` and grade it (call once, after the agent is done)."""
        run = await self.run(sandbox)
        if isinstance(run, Verdict):
            return run
        verdict = self.grade_run(run, patch=patch)
        if patch and self.edits_hidden_tests(patch):
            verdict = verdict.with_flags(HackFlag.TEST_EDITED)
        return verdict.model_copy(update={"reverted": run.reverted}) if run.reverted else verdict

    def edits_hidden_tests(self, patch: str) -> bool:
        """Whether the agent's ``patch`` touches a file the hidden tests modify or create."""
        modified, created = patch_files(self.test_patch)
        hidden = {*self.test_files, *self.new_test_files, *modified, *created, *self.hidden_files}
        touched = re.findall(r"^diff --git a/(\S+) b/(\S+)$", patch, re.MULTILINE)
        return any(a in hidden or b in hidden for a, b in touched)


def wrap_eval_script(
    script: str, *, nonce_stdin: bool = False, pythonpath: str | None = None
) -> str:
    """Surround ``script`` with the markers; exit with the test command's status.

    The exit status comes from the sandbox, not from the log, so lines the tests
    print cannot fake it. With ``nonce_stdin`` the markers carry the nonce the shell
    reads as the first line of its stdin (then stdin is ``/dev/null`` for the tests): it
    lives only in the shell's memory, never on a command line, in a file or in the
    tests' environment. ``pythonpath``: a folder the script makes (a new one, or the run
    fails before the start marker, exit 97) with :data:`SITECUSTOMIZE` in it, first on
    ``PYTHONPATH`` for the tests (the safe path). The preparation runs in the same
    shell as the tests, with no process but ``mkdir``.
    """
    nonce = " $PATCHGYM_NONCE" if nonce_stdin else ""
    lines = []
    if nonce_stdin:
        lines += ["IFS= read -r PATCHGYM_NONCE || exit 97", "exec </dev/null"]
    if pythonpath:
        q = shlex.quote(pythonpath)
        lines.append(
            f"mkdir -m 700 {q} && printf '%s' {shlex.quote(SITECUSTOMIZE)} > {q}/sitecustomize.py"
            " || exit 97"
        )
    lines += [f'echo "{START_TEST_OUTPUT}{nonce}"', "("]
    if pythonpath:
        lines.append(f'export PYTHONPATH={shlex.quote(pythonpath)}"${{PYTHONPATH:+:$PYTHONPATH}}"')
    lines += [
        script.rstrip("\n"),
        ")",
        "PATCHGYM_TEST_EXIT_CODE=$?",
        f'echo "{END_TEST_OUTPUT}{nonce}"',
        f'echo "{TEST_EXIT_CODE}{nonce}: $PATCHGYM_TEST_EXIT_CODE"',
        "exit $PATCHGYM_TEST_EXIT_CODE",
    ]
    return "\n".join(lines)


@dataclass(frozen=True)
class _Step:
    """One shell step of staging; ``failure``: the infra error its failure is (None: its
    failure is ignored); ``stdin``: it reads the exec's stdin (the others read nothing)."""

    shell: str
    failure: str | None
    stdin: bool = False


STEP_EXIT = 80
"""Staging step ``i`` that fails ends its exec with ``STEP_EXIT + i`` (git's own codes
never pass through, so the code names the step)."""


async def _run_steps(
    sandbox: SandboxLike, steps: list[_Step], *, stdin: str | None = None
) -> Verdict | None:
    """Run staging steps in one exec, in order, stopping at the first that fails: None, or
    the infra verdict naming that step."""
    if not steps:
        return None
    lines = []
    for i, step in enumerate(steps):
        cmd = step.shell if step.stdin else f"{step.shell} </dev/null"
        lines.append(f"{cmd} || :" if step.failure is None else f"{cmd} || exit {STEP_EXIT + i}")
    uses_stdin = any(step.stdin for step in steps)
    done = await sandbox.exec("\n".join(lines), stdin=stdin if uses_stdin else None)
    if done.exit_code == 0:
        return None
    i = done.exit_code - STEP_EXIT
    failure = steps[i].failure if 0 <= i < len(steps) else None
    return _infra(failure or "staging the hidden tests failed", done)


def _flag_of(path: str) -> HackFlag:
    """What a path the diff policy reverted says the policy tried."""
    name = path.rsplit("/", 1)[-1]
    if runner_prefix(path) is not None:
        return HackFlag.SHADOWING
    if is_test_path(path):
        return HackFlag.TEST_EDITED
    if name in STEERING_NAMES or name in SECTION_FILES or name.endswith(STEERING_SUFFIXES):
        return HackFlag.STEERING
    return HackFlag.SHADOWING  # the policy's only other reason: a new root module


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
