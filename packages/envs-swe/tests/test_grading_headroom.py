"""Grading has memory headroom the patch cannot take: a patch whose code, run by the tests,
fills ``/tmp`` is graded by its own tests (RESOLVED_NO, the failed tests as the reason) in
the one grading sandbox; one that then fills memory too loses its test run (RESOLVED_NO,
the run's reason). Never an infra error, never a lost sandbox that needs the control
grading of :mod:`patchgym_envs.blame` to assign the blame.

Without the headroom (disk as large as memory) the full ``/tmp`` leaves no memory and the
OOM killer ends the test runner: no test is read, the first test fails."""

from __future__ import annotations

import subprocess
from pathlib import Path

from patchgym_envs import EnvConfig, bundled_task, evaluate_patch
from patchgym_envs.sandboxes import grading_resources
from patchgym_sandbox import Resources, SandboxBackend, SandboxSpec

FILL_TMP = """\
chunk = b'x' * (1 << 20)
try:
    with open('/tmp/pg-fill', 'wb') as f:
        while True:
            f.write(chunk)
except OSError:
    pass
"""
FILL_MEMORY = "hog = []\nwhile True:\n    hog.append(bytearray(1 << 24))\n"
EQUAL = Resources(memory_mb=320, disk_mb=320, pids=128)
"""Disk as large as memory: without headroom a full /tmp leaves no memory at all."""


def hostile_patch(tmp_path: Path, code: str) -> str:
    """``code`` at the top of the module the task's tests import (the bug left in)."""
    from patchgym_envs.bundled.template import materialise

    root, _ = materialise("csvlite")
    work = tmp_path / "w"
    subprocess.run(["cp", "-a", str(root), str(work)], check=True)
    subprocess.run(["git", "cat-file", "-e", "HEAD"], cwd=work, check=True)  # a repo already
    parser = work / "csvlite" / "parser.py"
    parser.write_text(code + parser.read_text())
    out = subprocess.run(["git", "diff"], cwd=work, capture_output=True, text=True, check=True)
    return out.stdout


async def test_a_patch_filling_tmp_is_graded_by_its_tests(
    backend: SandboxBackend, specs: list[SandboxSpec], tmp_path: Path
) -> None:
    patch = hostile_patch(tmp_path, FILL_TMP)
    env = EnvConfig(resources=EQUAL)
    verdict = await evaluate_patch(
        bundled_task("csvlite"), patch, backend, env=env, blame_patch=True
    )
    assert verdict.infra_error is None, verdict
    assert verdict.status.value == "RESOLVED_NO" and verdict.reward == 0.0, verdict
    assert verdict.parsed > 0 and verdict.rejected is None, verdict  # the tests ran and report
    assert any(not t.ok for t in verdict.tests), verdict
    [spec] = specs  # graded in one sandbox: it survived, no control grading was needed
    assert spec.resources == grading_resources(EQUAL)


async def test_a_patch_filling_tmp_then_memory_loses_its_run(
    backend: SandboxBackend, specs: list[SandboxSpec], tmp_path: Path
) -> None:
    patch = hostile_patch(tmp_path, FILL_TMP + FILL_MEMORY)
    env = EnvConfig(resources=EQUAL)
    verdict = await evaluate_patch(
        bundled_task("csvlite"), patch, backend, env=env, blame_patch=True
    )
    assert verdict.infra_error is None, verdict
    assert verdict.status.value == "RESOLVED_NO" and verdict.reward == 0.0, verdict
    assert verdict.rejected, verdict  # the run's reason: killed without reporting
    assert verdict.grading_sandbox == "fresh"
    assert len(specs) == 1  # the sandbox survived: the OOM killer took the hog
