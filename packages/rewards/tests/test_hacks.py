# ruff: noqa: F811  (the repo fixture comes from test_plan)
"""The hack corpus through GradingPlan on a real checkout with real pytest (same sandbox).

Every hack grades 0 (never infra) and the verdict says why: the paths the diff policy
reverted, or the rejection reason. The gold change still resolves; crashes are
RESOLVED_NO with their exception line. Fresh-sandbox grading (which also defeats
planted site-packages and background processes) is tested end to end in envs-swe.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hack_corpus import CRASHES, HACKS, Hack
from rewards_sandbox import DirSandbox
from test_plan import F2P, FIXED, P2P, git, repo  # noqa: F401  (fixture)

from patchgym_rewards import GradedRun, GradingPlan, ResolvedStatus
from patchgym_rewards.policy import pytest_section, runner_prefix, steers

EVAL = "python -m pytest --no-header -rA -p no:cacheprovider tests/test_calc.py"


def plan(base: str, patch: str, eval_script: str = EVAL, **extra: object) -> GradingPlan:
    return GradingPlan(
        base_commit=base,
        test_files=["tests/test_calc.py"],
        test_patch=patch,
        eval_script=eval_script,
        fail_to_pass=F2P,
        pass_to_pass=P2P,
        timeout=120,
        **extra,  # type: ignore[arg-type]
    )


def plant(root: Path, hack: Hack) -> str:
    for rel, text in hack.files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "add", "-A")
    diff = git(root, "diff", "--cached", "--binary")
    git(root, "reset", "-q")
    return diff


def test_corpus_size_and_families() -> None:
    assert len(HACKS) + len(CRASHES) >= 20
    assert len({h.name for h in (*HACKS, *CRASHES)}) == len(HACKS) + len(CRASHES)
    assert len({h.family for h in HACKS}) >= 8


@pytest.mark.parametrize("hack", HACKS, ids=lambda h: h.name)
async def test_hack_grades_zero_with_its_reason(repo: tuple[Path, str, str], hack: Hack) -> None:
    root, base, patch = repo
    diff = plant(root, hack)
    verdict = await plan(base, patch).grade(DirSandbox(root), patch=diff)
    assert verdict.reward == 0.0 and not verdict.resolved, verdict
    assert verdict.infra_error is None, verdict
    assert set(hack.reverted) <= set(verdict.reverted), verdict.reverted
    assert len(set(verdict.reverted)) == len(verdict.reverted)
    if hack.reason:
        assert verdict.rejected and hack.reason in verdict.rejected, verdict
    elif hack.reason == "":
        assert verdict.conflicting == F2P, verdict


@pytest.mark.parametrize("hack", CRASHES, ids=lambda h: h.name)
async def test_crash_is_resolved_no_with_its_line(repo: tuple[Path, str, str], hack: Hack) -> None:
    root, base, patch = repo
    diff = plant(root, hack)
    verdict = await plan(base, patch).grade(DirSandbox(root), patch=diff)
    assert verdict.status is ResolvedStatus.NO and verdict.infra_error is None, verdict
    assert verdict.rejected and hack.reason and hack.reason in verdict.rejected, verdict


async def test_gold_still_resolves_with_python_m(repo: tuple[Path, str, str]) -> None:
    root, base, patch = repo
    (root / "calc.py").write_text(FIXED)
    (root / "setup.cfg").write_text("[metadata]\nname = calc\n")  # not a pytest section
    verdict = await plan(base, patch).grade(DirSandbox(root), patch="x")
    assert verdict.resolved and verdict.reverted == []


async def test_plugin_autoload_is_off_unless_asked(repo: tuple[Path, str, str]) -> None:
    root, base, patch = repo
    probe = "echo AUTO=${PYTEST_DISABLE_PLUGIN_AUTOLOAD:-unset}"
    run = await plan(base, patch, eval_script=probe).run(DirSandbox(root))
    assert isinstance(run, GradedRun) and "AUTO=1" in run.log
    assert plan(base, patch, plugin_autoload=True).plugin_autoload  # the task flag


def test_policy_table() -> None:
    assert steers("conftest.py", added=False) and steers("a/b/conftest.py", added=True)
    assert steers("tox.ini", added=False) and steers("x.pth", added=True)
    assert steers("tests/test_x.py", added=False) and not steers(
        "tests/x.py", added=False, tests=False
    )
    assert steers("pytest/__main__.py", added=True) and not steers("src/_pytest/x.py", added=False)
    assert runner_prefix("src/pytest_evil/x.py") == "src/pytest_evil"
    assert not steers("django/test/utils.py", added=False)  # library code named test
    assert not steers("sympy/testing/pytest.py", added=False)
    old = "[metadata]\nname = a\n[tool:pytest]\naddopts = -q\n"
    assert pytest_section("setup.cfg", old) == pytest_section("setup.cfg", old + "[x]\ny = 1\n")
    assert pytest_section("setup.cfg", old) != pytest_section("setup.cfg", old + "  -p evil\n")
    toml = '[project]\nname = "a"\n'
    assert pytest_section("pyproject.toml", toml) != pytest_section(
        "pyproject.toml", toml + "[tool.pytest.ini_options]\naddopts = '-p x'\n"
    )


async def test_collection_crash_without_tracebacks_names_the_interruption(
    repo: tuple[Path, str, str],
) -> None:
    """``--tb=no`` (the harness's flag for many repos) prints no exception line."""
    root, base, patch = repo
    diff = plant(root, CRASHES[0])
    quiet = plan(base, patch, eval_script=EVAL.replace("-rA", "-rA --tb=no"))
    verdict = await quiet.grade(DirSandbox(root), patch=diff)
    assert verdict.rejected and "Interrupted: 1 error during collection" in verdict.rejected
