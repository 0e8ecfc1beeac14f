"""The parity gate: run a built task's gold and empty patches once before shipping it.

Sandboxes have no network, so a test that downloads data at test time fails under the
gold patch for that reason alone. Such tests (each on its own evidence, see
:mod:`patchgym_envs.localbuild.network`) are taken out of the task's test lists and
recorded in ``metadata["network_tests"]``; more than ``allow_drop`` of them refuses the
row (a broken environment looks like that). The row then ships only when the gold patch
passes every kept test and the empty patch fails every FAIL_TO_PASS test; otherwise it is
unbuildable, with the reason.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field

from patchgym_envs.config import default_of
from patchgym_envs.grading import plan_for
from patchgym_envs.localbuild.errors import BuildFailed, Unbuildable
from patchgym_envs.localbuild.network import network_failures
from patchgym_envs.sandboxes import apply_patch, run_setup, spec_for
from patchgym_envs.task import Task
from patchgym_sandbox import SandboxBackend


class Probe(BaseModel):
    failing: list[str]
    """Tests that did not pass under the gold patch."""
    network: dict[str, str]
    """Of those, the ones whose own failure names a network error -> that line."""
    log: str = ""


class Gate(BaseModel):
    """The parity gate's verdict on one row."""

    task: Task
    """The task as shipped (network-bound tests moved out)."""
    network: dict[str, str] = Field(default_factory=dict)
    gold_log: str = ""
    empty_log: str = ""
    summary: str = ""


async def run_patch(task: Task, backend: SandboxBackend, patch: str) -> tuple[list[str], str]:
    """The tests of ``task`` that do not pass under ``patch``, and the test log."""
    sandbox = backend.sandbox(spec_for(task, backend, labels={"patchgym.purpose": "probe"}))
    try:
        await sandbox.start()
        await run_setup(sandbox, task, timeout=default_of("setup_timeout_s"))
        applied, output = await apply_patch(sandbox, patch)
        if not applied:
            raise BuildFailed(f"the gold patch does not apply: {output.strip()[-300:]}")
        plan = plan_for(task)
        run = await plan.run(sandbox)
        if not hasattr(run, "log"):
            raise BuildFailed(f"probe run failed: {getattr(run, 'infra_error', run)}")
        verdict = plan.grade_run(run, patch=patch or None)  # type: ignore[arg-type]  # hasattr(run, 'log') above narrows the run result
    finally:
        await sandbox.close()
    if verdict.parsed == 0 and patch:
        tail = " | ".join(run.log.strip().splitlines()[-3:])
        raise BuildFailed(f"the test run gave no test results: {tail[-300:]}")
    if verdict.parsed == 0:  # the empty patch broke collection: nothing passed
        return [*task.fail_to_pass, *task.pass_to_pass], run.log
    return [t.name for t in verdict.tests if not t.ok], run.log


async def probe_gold(task: Task, backend: SandboxBackend) -> Probe:
    failing, log = await run_patch(task, backend, task.gold_patch)
    return Probe(failing=failing, network=network_failures(log, failing), log=log)


async def parity_gate(task: Task, backend: SandboxBackend, *, allow_drop: int) -> Gate:
    """Run gold and empty (at once); raise :class:`Unbuildable` (with the logs kept on the
    error's ``gate``) when the row would not grade like the harness."""
    try:
        async with asyncio.TaskGroup() as runs:  # a test file waiting on the network waits once
            gold_run = runs.create_task(probe_gold(task, backend))
            empty_run = runs.create_task(run_patch(task, backend, ""))
    except ExceptionGroup as failed:  # the first failure, as the caller knows it
        raise failed.exceptions[0] from None
    gold, (empty_failing, empty_log) = gold_run.result(), empty_run.result()
    gate = Gate(task=task, network=gold.network, gold_log=gold.log, empty_log=empty_log)
    if set(gold.network) & set(task.fail_to_pass):
        raise GateFailed(
            f"FAIL_TO_PASS needs the network: {sorted(set(gold.network) & set(task.fail_to_pass))[:3]}",
            gate,
        )
    if len(gold.network) > allow_drop:
        raise GateFailed(
            f"{len(gold.network)} tests fail with a network error under gold, more than "
            f"--allow-drop {allow_drop} (raise it to drop them; evidence in report.md)",
            gate,
        )
    broken = [t for t in gold.failing if t not in gold.network]
    if broken:
        raise GateFailed(
            f"gold fails {len(broken)} kept tests (no network error of their own): "
            f"{', '.join(broken[:3])}{' ...' if len(broken) > 3 else ''}",
            gate,
        )
    shipped = without_network_tests(task, gold.network)
    passing = [t for t in shipped.fail_to_pass if t not in empty_failing]
    if passing:
        raise GateFailed(
            f"empty patch passes {len(passing)} FAIL_TO_PASS tests: {', '.join(passing[:3])}",
            gate,
        )
    gate.task = shipped
    gate.summary = (
        f"ok: gold passes {len(shipped.fail_to_pass) + len(shipped.pass_to_pass)} kept tests, "
        f"empty fails {len(shipped.fail_to_pass)} FAIL_TO_PASS; {len(gold.network)} dropped"
    )
    return gate


class GateFailed(Unbuildable):
    """The row failed the parity gate; ``gate`` holds the evidence (logs, network tests)."""

    def __init__(self, reason: str, gate: Gate) -> None:
        super().__init__(f"parity gate: {reason}")
        self.gate = gate


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
