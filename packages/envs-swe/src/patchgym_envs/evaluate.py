"""Grade a patch on a task in a fresh sandbox: validation, and episode grading by default.

Only the patch crosses into the grading sandbox: nothing the agent left in the episode's
sandbox (site-packages, ``.pth`` files, background processes, ``/tmp``) can reach the
hidden tests.
"""

from __future__ import annotations

from pathlib import Path

from patchgym_envs import grading
from patchgym_envs.config import EnvConfig, default_of
from patchgym_envs.grading import Verdict
from patchgym_envs.sandboxes import apply_patch, ensure_alive, run_setup, spec_for
from patchgym_envs.task import Task
from patchgym_sandbox import InfraError, SandboxBackend


async def evaluate_patch(
    task: Task,
    patch: str,
    backend: SandboxBackend,
    *,
    python: str | None = None,
    run_id: str | None = None,
    rollout_id: str | None = None,
    env: EnvConfig | None = None,
    log_path: Path | None = None,
) -> Verdict:
    """Create a sandbox for ``task``, apply ``patch``, grade, close. Never leaks the sandbox.

    A patch that does not apply grades 0 (the patch's fault); infrastructure failures
    come back as a verdict with ``infra_error`` set. ``env``: the run's episode settings
    (its ``setup_timeout_s`` and ``python`` apply here). ``log_path``: keep the test log
    there (gzip) when the tests ran.
    """
    if env is not None:
        python = python or env.python
    setup_timeout_s = env.setup_timeout_s if env is not None else default_of("setup_timeout_s")
    spec = spec_for(task, backend, python=python, run_id=run_id, rollout_id=rollout_id)
    sandbox = backend.sandbox(spec)
    try:
        await sandbox.start()
        await run_setup(sandbox, task, timeout=setup_timeout_s)
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
        return verdict.model_copy(update={"grading_sandbox": "fresh"})
    except InfraError as exc:
        return Verdict.infra(f"{type(exc).__name__}: {exc}")
    finally:
        await sandbox.close()
