"""The typed result of grading one rollout."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from patchgym_rewards.status import ResolvedStatus, TestStatus


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
