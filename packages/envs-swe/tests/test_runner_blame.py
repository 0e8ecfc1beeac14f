"""A run that finds no test runner (``No module named pytest``) reports no test at all.

With the patch applied the patch is the first suspect, so the task is graded again without
it (:mod:`patchgym_envs.blame`'s control): when the tests run there, the patch removed
what the runner needed and scores 0; when they report nothing there either, the
environment lacks the runner (a broken image or interpreter) and the episode is
infrastructure, masked rather than trained on as a 0. Real grading runs on the local
backend; the control costs one more sandbox, and only on such a failure.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from patchgym_envs import EnvConfig, bundled_task, evaluate_patch
from patchgym_sandbox import Sandbox, SandboxBackend, SandboxLost, SandboxSpec


async def test_a_runner_missing_with_and_without_the_patch_is_infra(
    backend: SandboxBackend, specs: list[SandboxSpec]
) -> None:
    task = bundled_task("csvlite")
    broken = task.model_copy(
        update={"eval_script": "python3 -m pg_no_such_runner -rA tests/test_parser.py\n"}
    )
    verdict = await evaluate_patch(broken, task.gold_patch, backend, blame_patch=True)
    assert verdict.infra_error is not None, verdict
    assert "No module named pg_no_such_runner" in verdict.infra_error
    assert "with and without the patch" in verdict.infra_error
    assert len(specs) == 2  # the grading and its control


SHIM = "import sys\n\nimport pytest\n\nsys.exit(pytest.main(sys.argv[1:]))\n"


def git(root: Path, *args: str) -> str:
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    done = subprocess.run(["git", *ident, *args], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_a_patch_that_removes_the_runner_scores_zero(
    backend: SandboxBackend, specs: list[SandboxSpec], tmp_path: Path
) -> None:
    """The task's runner is a module of its repository; the patch deletes it."""
    from patchgym_envs.bundled.template import materialise

    task = bundled_task("csvlite")
    root, _ = materialise("csvlite")
    template = tmp_path / "template"
    subprocess.run(["cp", "-a", str(root), str(template)], check=True)
    (template / "runner_shim.py").write_text(SHIM)
    git(template, "add", "runner_shim.py")
    git(template, "commit", "-qm", "a runner of its own")
    shimmed = task.model_copy(
        update={
            "template": str(template),
            "base_commit": git(template, "rev-parse", "HEAD").strip(),
            "eval_script": task.eval_script.replace("-m pytest", "-m runner_shim"),
        }
    )
    work = tmp_path / "work"
    subprocess.run(["cp", "-a", str(template), str(work)], check=True)
    git(work, "rm", "-q", "runner_shim.py")
    patch = git(work, "diff", "--cached")
    env = EnvConfig(data_roots=[str(tmp_path)])
    verdict = await evaluate_patch(shimmed, patch, backend, env=env, blame_patch=True)
    assert verdict.infra_error is None, verdict
    assert verdict.reward == 0.0 and "No module named runner_shim" in (verdict.rejected or "")
    assert len(specs) == 2  # the control ran the tests without the patch
    assert (await evaluate_patch(shimmed, task.gold_patch, backend, env=env)).resolved


FAKE_ABSENT = """\
import os as _os

with open("/proc/%d/fd/1" % _os.getppid(), "w") as _out:  # past pytest's capture
    _out.write("pg-runner: command not found\\n")
_os._exit(1)
"""


async def test_a_patch_faking_a_missing_runner_then_losing_the_sandbox_scores_zero(
    backend: SandboxBackend,
    specs: list[SandboxSpec],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The attack on the runner control: a patch whose code prints a missing runner's line
    and then leaves the sandbox unanswering (here the probe after the run is made to fail,
    as a patch that exhausts the pids does) must not turn its 0 into a masked infra
    episode: the lost sandbox's own blame decides, and its control grading succeeds."""
    from patchgym_envs import evaluate as evaluate_module
    from patchgym_envs.bundled.template import materialise

    root, _ = materialise("csvlite")
    work = tmp_path / "w"
    subprocess.run(["cp", "-a", str(root), str(work)], check=True)
    parser = work / "csvlite" / "parser.py"
    parser.write_text(FAKE_ABSENT + parser.read_text())
    patch = git(work, "diff")
    real = evaluate_module.ensure_alive
    probes: list[str] = []

    async def lost_after_the_patched_run(sandbox: Sandbox) -> None:
        probes.append(sandbox.id)
        if len(probes) == 1:
            raise SandboxLost(f"sandbox {sandbox.id} stopped answering")
        await real(sandbox)

    monkeypatch.setattr(evaluate_module, "ensure_alive", lost_after_the_patched_run)
    verdict = await evaluate_patch(bundled_task("csvlite"), patch, backend, blame_patch=True)
    assert verdict.infra_error is None, verdict
    assert verdict.reward == 0.0 and not verdict.resolved, verdict
    assert len(specs) == 2  # the grading and the control without the patch
