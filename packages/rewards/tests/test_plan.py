"""GradingPlan against a real git checkout and real pytest runs (no mocks).

Covers the anti-hacking steps: an agent's conftest.py (forging results or
skipping everything, even git-ignored), an edited hidden test file, an
``xfail(run=False)`` added to a FAIL_TO_PASS test, and a hidden patch that fails
to apply (an infra error, not a 0).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest
from rewards_sandbox import DirSandbox

from patchgym_rewards import GradedRun, GradingPlan, SandboxLike, reward_config, shape
from patchgym_rewards.plan import patch_files

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
FIXED = BUGGY.replace("a - b", "a + b")
BASE_TESTS = "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
HIDDEN_TESTS = BASE_TESTS + "\n\ndef test_add():\n    assert add(2, 3) == 5\n"
HIDDEN_TESTS = HIDDEN_TESTS.replace("from calc import mul", "from calc import add, mul")
F2P = ["tests/test_calc.py::test_add"]
P2P = ["tests/test_calc.py::test_mul"]

FORGING_CONFTEST = textwrap.dedent(
    """
    import os
    import sys

    def pytest_sessionfinish(session, exitstatus):
        sys.stdout.write("\\nPASSED tests/test_calc.py::test_add\\n")
        sys.stdout.write("PASSED tests/test_calc.py::test_mul\\n")
        sys.stdout.flush()
        os._exit(0)
    """
)
SKIPPING_CONFTEST = textwrap.dedent(
    """
    import pytest

    def pytest_collection_modifyitems(config, items):
        for item in items:
            item.add_marker(pytest.mark.skip(reason="agent"))
    """
)


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    """A checkout at the buggy base commit, and the hidden test patch."""
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text(BUGGY)
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "test_calc.py").write_text(BASE_TESTS)
    git(root, "init", "-q")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "tests" / "test_calc.py").write_text(HIDDEN_TESTS)
    patch = git(root, "diff")
    git(root, "checkout", "-q", "--", ".")
    return root, base, patch


def plan_for(base: str, patch: str, **extra: object) -> GradingPlan:
    fields: dict[str, object] = {
        "base_commit": base,
        "test_files": ["tests/test_calc.py"],
        "test_patch": patch,
        "eval_script": "pytest --no-header -rA --tb=no -p no:cacheprovider tests/test_calc.py",
        "fail_to_pass": F2P,
        "pass_to_pass": P2P,
        "timeout": 120,
    }
    return GradingPlan(**{**fields, **extra})  # type: ignore[arg-type]


async def test_dir_sandbox_satisfies_protocol(tmp_path: Path) -> None:
    assert isinstance(DirSandbox(tmp_path), SandboxLike)


async def test_gold_patch_resolves(repo: tuple[Path, str, str]) -> None:
    root, base, patch = repo
    (root / "calc.py").write_text(FIXED)
    verdict = await plan_for(base, patch).grade(DirSandbox(root))
    assert verdict.resolved and verdict.reward == 1.0
    assert verdict.exit_code == 1  # the must-fail canary test failed, as it must
    assert [t.name for t in verdict.tests if t.ok] == F2P + P2P


async def test_no_change_does_not_resolve(repo: tuple[Path, str, str]) -> None:
    root, base, patch = repo
    verdict = await plan_for(base, patch).grade(DirSandbox(root))
    assert not verdict.resolved and verdict.infra_error is None
    assert verdict.f2p_passed == 0 and verdict.p2p_passed == 1
    shaped = shape(verdict, reward_config("debug_gym", step_penalty=0.01), steps=3)
    assert shaped.shaped_reward == pytest.approx(-0.03)


@pytest.mark.parametrize("conftest", [FORGING_CONFTEST, SKIPPING_CONFTEST])
@pytest.mark.parametrize("where", ["conftest.py", "tests/conftest.py"])
async def test_agent_conftest_is_removed(
    repo: tuple[Path, str, str], conftest: str, where: str
) -> None:
    root, base, patch = repo
    (root / where).write_text(conftest)
    (root / ".gitignore").write_text("conftest.py\n")  # hiding it does not help
    verdict = await plan_for(base, patch).grade(DirSandbox(root))
    assert not (root / where).exists()
    assert not verdict.resolved and verdict.infra_error is None


async def test_forging_conftest_would_win_without_the_plan(repo: tuple[Path, str, str]) -> None:
    """Why the plan cleans: the forged log is indistinguishable (exit code 0)...

    ...except for the canaries, which catch it even with the diff policy off.
    """
    root, base, patch = repo
    (root / "conftest.py").write_text(FORGING_CONFTEST)
    bare = plan_for(base, patch, clean_collection_files=False, canaries=False)
    assert (await bare.grade(DirSandbox(root))).resolved
    verdict = await plan_for(base, patch, clean_collection_files=False).grade(DirSandbox(root))
    assert not verdict.resolved and verdict.rejected and verdict.rejected.startswith("forged")
    assert "forged_log" in verdict.flags


async def test_tracked_conftest_edit_is_restored(repo: tuple[Path, str, str]) -> None:
    root, base, patch = repo
    (root / "tests" / "conftest.py").write_text("# original\n")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "conftest")
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "tests" / "conftest.py").write_text(SKIPPING_CONFTEST)
    (root / "calc.py").write_text(FIXED)
    verdict = await plan_for(base, patch).grade(DirSandbox(root))
    assert (root / "tests" / "conftest.py").read_text() == "# original\n"
    assert verdict.resolved


async def test_edited_test_file_is_reset(repo: tuple[Path, str, str]) -> None:
    """xfail(run=False) or a rewritten assertion on the hidden test do not survive."""
    root, base, patch = repo
    (root / "tests" / "test_calc.py").write_text(
        "import pytest\nfrom calc import add, mul\n\n\ndef test_mul():\n    assert True\n\n\n"
        "@pytest.mark.xfail(run=False)\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    verdict = await plan_for(base, patch).grade(DirSandbox(root))
    assert not verdict.resolved
    assert (root / "tests" / "test_calc.py").read_text() == HIDDEN_TESTS


async def test_agent_cannot_block_the_hidden_patch(repo: tuple[Path, str, str]) -> None:
    """Creating the file a hidden patch adds, or editing one it changes, is undone."""
    root, base, patch = repo
    new_test = "diff --git a/tests/test_new.py b/tests/test_new.py\nnew file mode 100644\n"
    new_test += "--- /dev/null\n+++ b/tests/test_new.py\n@@ -0,0 +1,2 @@\n"
    new_test += "+def test_new():\n+    assert True\n"
    (root / "tests" / "test_new.py").write_text("def test_new():\n    assert False\n")
    (root / "tests" / "test_calc.py").write_text("# agent rewrote this\n")
    (root / "calc.py").write_text(FIXED)
    plan = plan_for(base, patch + new_test).model_copy(update={"test_files": []})
    plan = plan.model_copy(update={"fail_to_pass": [*F2P, "tests/test_new.py::test_new"]})
    plan = plan.model_copy(update={"eval_script": plan.eval_script + " tests/test_new.py"})
    verdict = await plan.grade(DirSandbox(root))
    assert verdict.resolved, verdict


def test_patch_files() -> None:
    diff = (
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n"
        "diff --git a/n.py b/n.py\nnew file mode 100644\n--- /dev/null\n+++ b/n.py\n"
    )
    assert patch_files(diff) == (["a.py"], ["n.py"])


async def test_patch_that_does_not_apply_is_infra(repo: tuple[Path, str, str]) -> None:
    root, base, _ = repo
    bad = "diff --git a/tests/test_calc.py b/tests/test_calc.py\n--- a/tests/test_calc.py\n"
    bad += "+++ b/tests/test_calc.py\n@@ -1 +1 @@\n-not in the file\n+y\n"
    verdict = await plan_for(base, bad).grade(DirSandbox(root))
    assert verdict.infra_error is not None and "did not apply" in verdict.infra_error
    assert verdict.reward == 0.0 and shape(verdict, reward_config("binary")).shaped_reward is None


async def test_staging_is_one_exec_and_a_failure_names_its_step(
    repo: tuple[Path, str, str],
) -> None:
    """Resetting the test files and applying the hidden patch run as one exec; which of
    them failed is told apart by the exec's exit code, never by their output."""
    root, base, patch = repo
    sandbox = DirSandbox(root)
    await plan_for(base, patch).grade(sandbox)
    staged = [c for c in sandbox.commands if " checkout " in c and " apply -v -" in c]
    assert len(staged) == 1
    (root / "tests" / "test_calc.py").write_text(BASE_TESTS)
    plan = plan_for(base, patch).model_copy(update={"test_files": ["tests/nope.py"]})
    missing = await plan.grade(DirSandbox(root))
    assert missing.infra_error is not None
    assert "resetting test files to the base commit failed" in missing.infra_error


async def test_timeout_is_a_zero_not_infra(repo: tuple[Path, str, str]) -> None:
    root, base, patch = repo
    (root / "calc.py").write_text("import time\ntime.sleep(60)\n" + FIXED)
    plan = plan_for(base, patch).model_copy(update={"timeout": 2.0})
    verdict = await plan.grade(DirSandbox(root))
    assert not verdict.resolved and verdict.infra_error is None
    assert verdict.rejected and "timed out" in verdict.rejected


async def test_r2e_plan_with_hidden_files(tmp_path: Path) -> None:
    root = tmp_path / "r2e"
    root.mkdir()
    (root / "calc.py").write_text(FIXED)
    hidden = HIDDEN_TESTS.replace("from calc", "import sys\nsys.path.insert(0, '.')\nfrom calc")
    hidden += "\n\nclass TestMore:\n    def test_known_broken(self):\n        assert False\n"
    expected = {
        "test_mul": "PASSED",
        "test_add": "PASSED",
        "TestMore.test_known_broken": "FAILED",
    }
    plan = GradingPlan(
        grader="r2e",
        hidden_files={"r2e_tests/test_1.py": hidden},
        eval_script="pytest -rA -p no:cacheprovider r2e_tests",
        expected_output_json=json.dumps(expected),
        clean_collection_files=False,
    )
    verdict = await plan.grade(DirSandbox(root))
    assert verdict.resolved, verdict.tests
    (root / "calc.py").write_text(BUGGY)
    assert not (await plan.grade(DirSandbox(root))).resolved


@pytest.mark.parametrize("grader", ["r2e", "swebench"])
async def test_a_runner_that_cannot_start_is_a_crash_not_a_forgery(
    repo: tuple[Path, str, str], request: pytest.FixtureRequest, grader: str
) -> None:
    """The canaries go missing with everything else when the test runner cannot even
    start (here: a python without pytest, as a broken environment gives): the run scores
    0 as a crash, never flagged as a forged log, for both graders."""
    root, base, patch = repo
    (root / "calc.py").write_text(FIXED)
    bare = Path(tempfile.mkdtemp(prefix="pg-bare-"))  # no "pytest" in the runner's path
    request.addfinalizer(lambda: shutil.rmtree(bare))
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(bare)], check=True)
    pytest_cmd = f"{bare}/bin/python -m pytest -rA -p no:cacheprovider"
    if grader == "r2e":
        plan = GradingPlan(
            grader="r2e",
            hidden_files={"r2e_tests/test_1.py": HIDDEN_TESTS},
            eval_script=f"{pytest_cmd} r2e_tests",
            expected_output_json=json.dumps({"test_mul": "PASSED", "test_add": "PASSED"}),
        )
    else:
        plan = plan_for(base, patch, eval_script=f"{pytest_cmd} tests/test_calc.py")
    verdict = await plan.grade(DirSandbox(root), patch=FIXED)
    assert (verdict.resolved, verdict.reward, verdict.infra_error) == (False, 0.0, None)
    assert verdict.flags == [], verdict.rejected
    assert "No module named pytest" in (verdict.rejected or ""), verdict.rejected


def test_plan_is_data() -> None:
    plan = GradingPlan(eval_script="pytest -rA", fail_to_pass=["a"])
    assert GradingPlan.model_validate_json(plan.model_dump_json()) == plan
    with pytest.raises(ValueError, match="extra"):
        GradingPlan.model_validate({"eval_script": "x", "typo_field": 1})
    with pytest.raises(ValueError, match="needs expected_output_json"):
        GradingPlan(grader="r2e", eval_script="x")
    with pytest.raises(ValueError, match="unknown log parser 'pytset'"):
        GradingPlan(eval_script="x", log_parser="pytset")


async def test_full_harness_eval_script_runs_unwrapped(repo: tuple[Path, str, str]) -> None:
    """A SWE-bench 5.x eval script (markers, recorded exit code, final reset) as-is."""
    root, base, patch = repo
    (root / "calc.py").write_text(FIXED)
    script = "\n".join(
        [
            "set -uxo pipefail",
            f"git checkout {base} tests/test_calc.py",
            f"git apply -v - <<'EOF_114329324912'\n{patch}\nEOF_114329324912",
            ": '>>>>> Start Test Output'",
            "pytest --no-header -rA --tb=no -p no:cacheprovider tests/test_calc.py",
            "SWEBENCH_TEST_EXIT_CODE=$?",
            ": '>>>>> End Test Output'",
            'echo ">>>>> Test Exit Code: $SWEBENCH_TEST_EXIT_CODE"',
            f"git checkout {base} tests/test_calc.py",
        ]
    )
    plan = plan_for(base, "").model_copy(update={"test_files": [], "eval_script": script})
    run = await plan.run(DirSandbox(root))
    assert isinstance(run, GradedRun) and run.test_exit_code is None
    verdict = await plan.grade(DirSandbox(root))
    assert verdict.resolved and verdict.exit_code == 0
    (root / "calc.py").write_text(BUGGY)
    verdict = await plan.grade(DirSandbox(root))
    assert not verdict.resolved and verdict.exit_code == 1


async def test_staged_conftest_is_removed(repo: tuple[Path, str, str]) -> None:
    """A conftest the agent `git add`-ed is not in the base commit: removed, not restored."""
    root, base, patch = repo
    (root / "conftest.py").write_text(FORGING_CONFTEST)
    git(root, "add", "conftest.py")
    verdict = await plan_for(base, patch).grade(DirSandbox(root))
    assert not (root / "conftest.py").exists()
    assert not verdict.resolved and verdict.infra_error is None
