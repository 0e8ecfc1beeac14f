"""The one task schema every converter produces and every environment consumes.

A :class:`Task` is pure data: it can be written to JSONL or to a verl/rLLM parquet row
(``extra_info``) and read back unchanged. Nested mappings (``hidden_files``, ``env``,
``metadata``, ``original``) are accepted as JSON text too, because parquet rows store
them that way (see :meth:`Task.to_row`).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SourceFormat = Literal["r2egym", "swebench", "swebench_r2e", "swesmith", "swegym", "bundled"]
"""Where a task came from (the converter that made it)."""

Grader = Literal["swebench", "swesmith", "r2e"]

JSON_TEXT_FIELDS: tuple[str, ...] = ("hidden_files", "env", "metadata", "original")
"""Fields stored as JSON text in flat rows (parquet structs cannot hold arbitrary maps)."""


class Task(BaseModel):
    """What one episode needs: where the repository is, what is wrong, how to grade."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    source_format: SourceFormat
    repo: str = ""
    """``owner/name`` of the upstream repository (informational)."""
    base_commit: str | None = None
    """Commit the sandbox's repository is at when the episode starts."""
    problem_statement: str
    image: str | None = None
    """Container image (docker, k8s, ags)."""
    template: str | None = None
    """Local template directory, or ``bundled:<name>`` for a bundled task (local backend)."""
    workdir: str = "/testbed"
    setup_commands: list[str] = Field(default_factory=list)
    """Run from ``workdir`` once, after the sandbox starts and before the agent acts."""
    env: dict[str, str] = Field(default_factory=dict)
    gold_patch: str = ""
    test_patch: str = ""
    """Hidden test diff, applied only at grading time."""
    stage_test_patch: bool = True
    """False when ``eval_script`` applies the test patch itself (SWE-bench's generated scripts)."""
    test_files: list[str] = Field(default_factory=list)
    """Existing files the hidden tests change: reset to ``base_commit`` before staging."""
    new_test_files: list[str] = Field(default_factory=list)
    """Files the hidden tests create: removed before staging."""
    hidden_files: dict[str, str] = Field(default_factory=dict)
    """Hidden files written at grading time (path relative to workdir -> content)."""
    eval_script: str
    """Bash run from ``workdir`` at grading time; its exit status is the test command's."""
    eval_timeout: float = Field(default=1800.0, gt=0)
    test_cmd: str | None = None
    """Visible test command the agent may run (debug-gym's ``eval`` and ``pdb``)."""
    grader: Grader = "swebench"
    log_parser: str = "pytest"
    fail_to_pass: list[str] = Field(default_factory=list)
    pass_to_pass: list[str] = Field(default_factory=list)
    expected_output_json: str | None = None
    """R2E-Gym: the reference run's ``{test: status}`` map as JSON text."""
    version: str | None = None
    created_at: str | None = None
    hints: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    original: dict[str, Any] | None = None
    """The untouched source row (JSON-safe values), for provenance and round trips."""

    @field_validator(*JSON_TEXT_FIELDS, mode="before")
    @classmethod
    def _json_text(cls, value: Any) -> Any:
        if isinstance(value, str):
            return json.loads(value) if value.strip() else None
        return value

    @field_validator("hidden_files", "env", "metadata", mode="after")
    @classmethod
    def _not_none(cls, value: Any) -> Any:
        return {} if value is None else value

    @field_validator(
        "fail_to_pass",
        "pass_to_pass",
        "test_files",
        "new_test_files",
        "setup_commands",
        mode="before",
    )
    @classmethod
    def _list_text(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            return json.loads(value) if value.strip() else []
        if isinstance(value, (tuple, set, frozenset)) or callable(getattr(value, "tolist", None)):
            return list(value)
        return value  # a list, or a wrong type that pydantic reports naming the field

    def to_row(self) -> dict[str, Any]:
        """A flat, parquet-friendly dict (nested maps as JSON text); ``Task.model_validate`` reads it."""
        row = self.model_dump(mode="json")
        for name in JSON_TEXT_FIELDS:
            row[name] = json.dumps(row[name], sort_keys=True) if row[name] is not None else ""
        return row

    @property
    def uses_hidden_tests(self) -> bool:
        return bool(self.test_patch.strip() or self.hidden_files)
