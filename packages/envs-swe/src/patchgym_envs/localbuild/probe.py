"""Run a built task's gold patch once to find tests that need the network.

Sandboxes have no network, so a test that downloads data at test time fails under the
gold patch for that reason alone. Such tests are taken out of the task's test lists and
recorded in ``metadata["network_tests"]`` (with the error that shows it); a task whose
FAIL_TO_PASS needs the network cannot be graded offline and is reported as such.
"""

from __future__ import annotations

from pydantic import BaseModel

from patchgym_envs.config import default_of
from patchgym_envs.grading import plan_for
from patchgym_envs.localbuild.errors import BuildFailed
from patchgym_envs.localbuild.network import network_failures
from patchgym_envs.sandboxes import apply_patch, run_setup, spec_for
from patchgym_envs.task import Task
from patchgym_sandbox import SandboxBackend


class Probe(BaseModel):
    failing: list[str]
    """Tests that did not pass under the gold patch."""
    network: dict[str, str]
    """Of those, the ones whose failure names a network error -> that message."""


async def probe_gold(task: Task, backend: SandboxBackend) -> Probe:
    sandbox = backend.sandbox(spec_for(task, backend, labels={"patchgym.purpose": "probe"}))
    try:
        await sandbox.start()
        await run_setup(sandbox, task, timeout=default_of("setup_timeout_s"))
        applied, output = await apply_patch(sandbox, task.gold_patch)
        if not applied:
            raise BuildFailed(f"the gold patch does not apply: {output.strip()[-300:]}")
        plan = plan_for(task)
        run = await plan.run(sandbox)
        if not hasattr(run, "log"):
            raise BuildFailed(f"probe run failed: {getattr(run, 'infra_error', run)}")
        verdict = plan.grade_run(run, patch=task.gold_patch)  # type: ignore[arg-type]  # hasattr(run, 'log') above narrows the run result
    finally:
        await sandbox.close()
    if verdict.parsed == 0:
        tail = " | ".join(run.log.strip().splitlines()[-3:])
        raise BuildFailed(f"the gold patch's test run gave no test results: {tail[-300:]}")
    failing = [t.name for t in verdict.tests if not t.ok]
    return Probe(failing=failing, network=network_failures(run.log, failing))


def without_network_tests(task: Task, network: dict[str, str]) -> Task:
    """The task with network-bound tests moved out of its test lists into metadata."""
    if not network:
        return task
    return task.model_copy(
        update={
            "fail_to_pass": [t for t in task.fail_to_pass if t not in network],
            "pass_to_pass": [t for t in task.pass_to_pass if t not in network],
            "metadata": {**task.metadata, "network_tests": network},
        }
    )
