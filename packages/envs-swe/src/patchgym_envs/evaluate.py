"""Grade a patch on a task in a fresh sandbox: validation, and episode grading by default.

Only the patch crosses into the grading sandbox: nothing the agent left in the episode's
sandbox (site-packages, ``.pth`` files, background processes, ``/tmp``) can reach the
hidden tests.
"""

from __future__ import annotations

import time
from pathlib import Path

from patchgym_envs import grading
from patchgym_envs.blame import SANDBOX_FILE_ERRORS, policy_failure, still_present
from patchgym_envs.config import EnvConfig
from patchgym_envs.grading import Verdict
from patchgym_envs.sandboxes import apply_patch, ensure_alive, run_setup
from patchgym_envs.task import Task
from patchgym_sandbox import InfraError, SandboxBackend, SandboxLost


async def evaluate_patch(
    task: Task,
    patch: str,
    backend: SandboxBackend,
    *,
    python: str | None = None,
    run_id: str | None = None,
    rollout_id: str | None = None,
    env: EnvConfig | None = None,
    blame_patch: bool = False,
    log_path: Path | None = None,
    lifecycle: dict[str, float] | None = None,
) -> Verdict:
    """Create a sandbox for ``task``, apply ``patch``, grade, close. Never leaks the sandbox.

    A patch that does not apply grades 0 (the patch's fault); infrastructure failures
    come back as a verdict with ``infra_error`` set. ``env``: the run's episode settings;
    the sandbox is built from them as the episode's is (:meth:`EnvConfig.sandbox_spec`:
    its resources plus the grader's memory headroom, lease, python, data roots), and its
    ``setup_timeout_s`` applies.
    ``blame_patch`` (episode grading): a failure after the patch is applied (the sandbox
    lost, hidden tests that cannot be staged) is graded again without the patch, and when
    that control succeeds the failure was the patch's: RESOLVED_NO with the reason
    (:mod:`blame`). ``log_path``: keep the test log there (gzip) when the tests ran.
    ``lifecycle``: seconds spent creating (start and setup) and closing the grading
    sandbox are added there, as ``grading_create`` and ``grading_close`` (phase times).
    """
    if env is not None:
        updates = {"python": python or env.python, "run_id": run_id or env.run_id}
        env = env.model_copy(update=updates)
    else:
        env = EnvConfig(python=python, run_id=run_id)
    spec = await env.aspec(task, backend, rollout_id=rollout_id, grading=True)
    sandbox = backend.sandbox(spec)
    applied = False
    absent: str | None = None
    times = lifecycle if lifecycle is not None else {}
    t0 = time.monotonic()
    try:
        await sandbox.start()
        await run_setup(sandbox, task, timeout=env.setup_timeout_s)
        _add(times, "grading_create", time.monotonic() - t0)
        applied, output = await apply_patch(sandbox, patch)
        if not applied:
            return Verdict(
                resolved=False,
                status=grading.ResolvedStatus.NO,
                reward=0.0,
                rejected=f"patch did not apply: {output[-1000:].strip()}",
                grading_sandbox="fresh",
            )
        verdict, log = await grading.grade_logged(task, sandbox, patch=patch)
        if log_path is not None and log:
            grading.keep_log(log_path, log)
        await ensure_alive(sandbox)
        absent = _runner_absent(verdict, log)  # only where the sandbox still answered
        verdict = verdict.model_copy(update={"grading_sandbox": "fresh"})
    except (InfraError, *SANDBOX_FILE_ERRORS) as exc:
        if not applied or (
            isinstance(exc, SandboxLost) and not await still_present(backend, sandbox.id)
        ):  # before the patch ran, or removed from outside
            return Verdict.infra(f"{type(exc).__name__}: {exc}")
        verdict = Verdict.infra(f"{type(exc).__name__}: {exc}")
    finally:
        t0 = time.monotonic()
        await sandbox.close()
        _add(times, "grading_close", time.monotonic() - t0)
    if not blame_patch or not patch.strip():
        return verdict
    if absent is not None:
        return await _runner_control(task, verdict, absent, backend, python, run_id, env)
    if verdict.infra_error is None:
        return verdict
    return await _control(task, verdict, backend, python=python, run_id=run_id, env=env)


def _runner_absent(verdict: Verdict, log: str) -> str | None:
    """The line saying the eval script's test runner is not there, in a run that reported
    no test at all (``No module named pytest``), or None."""
    if verdict.resolved or verdict.infra_error is not None or verdict.parsed:
        return None
    return grading.runner_absent(log)


async def _runner_control(
    task: Task,
    failed: Verdict,
    absent: str,
    backend: SandboxBackend,
    python: str | None,
    run_id: str | None,
    env: EnvConfig | None,
) -> Verdict:
    """The patched run found no test runner: the patch scores 0 when the task's tests run
    without it; when they report nothing without it either, the environment lacks the
    runner (a broken image or interpreter), infrastructure, not a 0 to train on."""
    control = await evaluate_patch(task, "", backend, python=python, run_id=run_id, env=env)
    if control.infra_error is None and (control.resolved or control.parsed):
        return failed
    return Verdict.infra(
        f"the eval script's test runner is missing, with and without the patch: {absent}"
    )


def _add(times: dict[str, float], name: str, seconds: float) -> None:
    times[name] = times.get(name, 0.0) + seconds


async def _control(
    task: Task,
    failed: Verdict,
    backend: SandboxBackend,
    *,
    python: str | None,
    run_id: str | None,
    env: EnvConfig | None,
) -> Verdict:
    """Grade ``task`` without the patch: if that works, the patch caused ``failed``."""
    control = await evaluate_patch(task, "", backend, python=python, run_id=run_id, env=env)
    if control.infra_error is not None:
        return failed
    return policy_failure(
        f"grading failed with the patch applied, and not without it: {failed.infra_error}",
        grading_sandbox=failed.grading_sandbox or "fresh",
    )
