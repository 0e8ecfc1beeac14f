"""The typed result of grading one rollout."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from patchgym_rewards.status import ResolvedStatus, TestStatus


class HackFlag(StrEnum):
    """What a graded run shows the policy tried (a training signal; see the README)."""

    TEST_EDITED = "test_edited"
    """The patch edited, created or deleted a hidden test file or a visible test file."""
    SHADOWING = "shadowing_module"
    """A new top-level module named like the stdlib, an installed distribution or the runner."""
    STEERING = "steering_file"
    """A file that configures the runner (conftest, ini, ``.pth``, sitecustomize) changed."""
    GIT_TAMPERED = "git_tampered"
    """The repository's git config or hooks carried commands (filters, hooks, diff.external)."""
    CANARY_FLIPPED = "canary_flipped"
    """The must-fail canary test was reported as passing."""
    FORGED_LOG = "forged_log"
    """The log contradicts the run: missing canary, summary, exit code or forged markers."""
    TRUNCATED = "truncated"
    """The test output was too large and was truncated (a flood hides real results)."""
    GIT_OUTSIDE_HEAD = "git_outside_head"
    """A command the episode ran read git refs or objects beyond HEAD (``git log --all``,
    ``git show <tag>:f``, ``git reflog``, ...; see :mod:`patchgym_rewards.gitreads`)."""


class TestRole(StrEnum):
    """Why a test is graded."""

    __test__ = False

    FAIL_TO_PASS = "FAIL_TO_PASS"
    PASS_TO_PASS = "PASS_TO_PASS"
    EXPECTED = "EXPECTED"  # R2E-Gym: an entry of expected_output_json


class TestOutcome(BaseModel):
    """One graded test: what the log said and whether that counts as success."""

    __test__ = False
    model_config = ConfigDict(frozen=True)

    name: str
    role: TestRole
    status: TestStatus | None = Field(description="status in the log; None if absent")
    expected: TestStatus | None = Field(
        default=None, description="R2E-Gym: the status the reference run recorded"
    )
    matched_as: str | None = Field(
        default=None, description="log id used when it differs from name (truncated ids)"
    )
    ok: bool


class Verdict(BaseModel):
    """Everything a trainer needs from grading one rollout.

    ``reward`` is the binary task reward (1.0 iff ``resolved``). ``shaped_reward`` is
    set only when a shaped reward config was asked for, and is always reported next
    to the binary one. When ``infra_error`` is set the run proved nothing about the
    patch: mask the rollout rather than train on its 0.
    """

    model_config = ConfigDict(frozen=True)

    resolved: bool
    status: ResolvedStatus
    reward: float
    shaped_reward: float | None = None
    tests: list[TestOutcome] = Field(default_factory=list)
    infra_error: str | None = None
    rejected: str | None = Field(
        default=None,
        description=(
            "why the run scored 0 without a per-test reading: the patch crashed the run "
            "(first exception line), or the log was not believed (exit code or runner "
            "summary contradicts it), or it timed out"
        ),
    )
    exit_code: int | None = None
    parsed: int = Field(default=0, description="number of test ids parsed from the log")
    conflicting: list[str] = Field(
        default_factory=list,
        description="test ids the log reported with conflicting outcomes (worst one kept)",
    )
    reverted: list[str] = Field(
        default_factory=list,
        description="files the diff policy reset to the base commit (or removed) before grading",
    )
    flags: list[HackFlag] = Field(
        default_factory=list, description="hack attempts this run shows (see HackFlag)"
    )
    grading_sandbox: Literal["fresh", "same"] | None = Field(
        default=None,
        description="where the tests ran: a fresh sandbox with only the diff, or the episode's",
    )

    @property
    def f2p_passed(self) -> int:
        return sum(t.ok for t in self.tests if t.role is TestRole.FAIL_TO_PASS)

    @property
    def f2p_total(self) -> int:
        return sum(t.role is TestRole.FAIL_TO_PASS for t in self.tests)

    @property
    def p2p_passed(self) -> int:
        return sum(t.ok for t in self.tests if t.role is TestRole.PASS_TO_PASS)

    @property
    def p2p_total(self) -> int:
        return sum(t.role is TestRole.PASS_TO_PASS for t in self.tests)

    def with_flags(self, *flags: HackFlag) -> Verdict:
        """This verdict with ``flags`` added (each once, in a stable order)."""
        merged = sorted({*self.flags, *flags})
        return self if merged == sorted(self.flags) else self.model_copy(update={"flags": merged})

    @classmethod
    def forged(
        cls, reason: str, *flags: HackFlag, exit_code: int | None = None, parsed: int = 0
    ) -> Verdict:
        """A run whose log was not believed: RESOLVED_NO, reward 0, ``reason`` and flags."""
        return cls(
            resolved=False,
            status=ResolvedStatus.NO,
            reward=0.0,
            rejected=reason,
            exit_code=exit_code,
            parsed=parsed,
            flags=sorted(set(flags)),
        )

    @classmethod
    def infra(cls, reason: str, *, exit_code: int | None = None) -> Verdict:
        """A run that cannot be graded: not resolved, reward 0, to be masked."""
        return cls(
            resolved=False,
            status=ResolvedStatus.NO,
            reward=0.0,
            infra_error=reason,
            exit_code=exit_code,
        )
