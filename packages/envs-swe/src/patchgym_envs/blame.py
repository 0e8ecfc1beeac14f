"""Who caused a failure: the policy (scored 0) or the infrastructure (masked).

A sandbox runs whatever the policy wrote. If its own processes fill memory or ``/tmp``,
kill every process, exhaust the pid limit, raise the init's OOM score or turn a directory
grading writes into into a dangling link, the failure is the policy's and the episode
scores 0 (RESOLVED_NO with the reason). Only a failure the policy could not have caused
is infrastructure (``infra_error``, ``reward_valid = False``).

The rule, applied only after the policy has acted: a lost sandbox that is no longer
listed by its backend was removed from outside (a reaper, an eviction, ``remove``) and
is infrastructure; otherwise a failure is the policy's when a **control** succeeds
without it — for a lost episode sandbox, a fresh sandbox of the same
spec starts and answers; for grading, the same task graded without the patch raises no
infrastructure error. When the control fails too, the engine or the task is at fault.
A graded run that found no test runner (``No module named pytest``) gets the same control:
the patch scores 0 when the tests run without it, else the environment lacks the runner
(infrastructure). The control costs one more sandbox, and only on failure.
"""

from __future__ import annotations

import logging

from patchgym_envs.grading import ResolvedStatus, Verdict
from patchgym_sandbox import (
    FileTooLarge,
    InfraError,
    PathOutsideSandbox,
    SandboxBackend,
    SandboxFileError,
    SandboxFileNotFound,
    SandboxSpec,
)

log = logging.getLogger(__name__)

SANDBOX_FILE_ERRORS = (PathOutsideSandbox, SandboxFileError, SandboxFileNotFound, FileTooLarge)
"""What the sandbox's files (links, FIFOs, a missing directory) make a file operation raise."""


def policy_failure(reason: str, *, grading_sandbox: str | None = None) -> Verdict:
    """RESOLVED_NO with ``reason``: a failure the policy's own processes caused."""
    return Verdict(
        resolved=False,
        status=ResolvedStatus.NO,
        reward=0.0,
        rejected=reason,
        grading_sandbox=grading_sandbox,  # type: ignore[arg-type]
    )


async def still_present(backend: SandboxBackend, sandbox_id: str) -> bool:
    """Whether the backend still lists the sandbox (dead inside, not removed from outside)."""
    try:
        return any(info.id == sandbox_id for info in await backend.list_sandboxes())
    except InfraError:
        return False


async def engine_healthy(backend: SandboxBackend, spec: SandboxSpec) -> bool:
    """Whether a fresh sandbox of ``spec`` starts and answers a command (the control)."""
    from patchgym_envs.sandboxes import ensure_alive

    fields = spec.model_dump()
    fields["rollout_id"] = None
    try:
        async with backend.sandbox(SandboxSpec.model_validate(fields)) as control:
            await ensure_alive(control)
    except InfraError as exc:
        log.warning("control sandbox failed too (%s): infrastructure", exc)
        return False
    return True
