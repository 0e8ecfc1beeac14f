# ruff: noqa: F811  (the repo fixture comes from test_plan)
"""Round two of the defences (issue 24), each against the attack it stops.

Canaries, nonce markers, truncation, strict F2P outcomes, the outer-summary reading
(a suite that runs pytest inside its tests), R2E's checks, the safe import path and
git without the repository's config, on real pytest runs in a real checkout.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rewards_sandbox import DirSandbox
from test_plan import F2P, FIXED, P2P, git, repo  # noqa: F401  (fixture)

from patchgym_rewards import GradedRun, GradingPlan, TestStatus, grade_r2e, grade_swebench
from patchgym_rewards.canary import canary_host, canary_problem, make_canaries
from patchgym_rewards.markers import END_TEST_OUTPUT, START_TEST_OUTPUT, sealed, unseal
from patchgym_rewards.policy import (
    Changes,
    parse_changes,
    resolve_unknown,
    shadow_prefix,
    top_module,
)
from patchgym_rewards.safepath import interpreter_of, shadow_names
from patchgym_rewards.verdict import HackFlag

EVAL = "python -m pytest --no-header -rA -p no:cacheprovider tests/test_calc.py"
REPORT_FLIP = textwrap.dedent(
    """
    import _pytest.reports as _r
    _orig = _r.TestReport.from_item_and_call.__func__

    def _flip(cls, item, call):
        rep = _orig(cls, item, call)
        if rep.failed:
            rep.outcome = "passed"
            rep.longrepr = None
        return rep

    _r.TestReport.from_item_and_call = classmethod(_flip)
    """
)
ASSERT_TO_XFAIL = (
    "import builtins\nfrom _pytest.outcomes import XFailed\nbuiltins.AssertionError = XFailed\n"
)
FORGER = "forged by a shadowing module"
FAKE = (
    f"import os\nprint({FORGER!r})\nprint('PASSED tests/test_calc.py::test_add')\n"
    "print('PASSED tests/test_calc.py::test_mul')\nprint('=== 2 passed in 0.01s ===')\nos._exit(0)\n"
)


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


def diff_of(root: Path) -> str:
    git(root, "add", "-A")
    diff = git(root, "diff", "--cached", "--binary")
    git(root, "reset", "-q")
    return diff


# ---- canaries ---------------------------------------------------------------------


def test_canary_host_only_when_the_file_is_collected_whole() -> None:
    files = ["tests/test_x.py"]
    assert canary_host("python -m pytest -rA tests/test_x.py", files) == "tests/test_x.py"
    assert canary_host(".venv/bin/python -W ignore -m pytest -rA tests", files) == files[0]
    assert canary_host("pytest -rA tests/test_x.py::test_a", files) is None
    assert canary_host("pytest -rA -k add tests/test_x.py", files) is None
    assert canary_host("pytest -rA -xvs tests/test_x.py", files) is None  # stops at a failure
    assert canary_host("pytest -rA --maxfail=1 tests/test_x.py", files) is None
    assert canary_host("pytest -rxXs tests/test_x.py", files) == files[0]
    assert canary_host("pytest -rA tests/other.py", files) is None
    assert canary_host("./tests/runtests.py x", files) is None  # not pytest
    # the runner is the command named pytest, not a path that contains the word
    assert canary_host("/opt/pytest-env/bin/python -m pytest -rA tests", files) == files[0]
    assert canary_host("pytest-3 -rA tests/test_x.py", files) == files[0]
    assert canary_host("cat pytest.ini; python -m pytest -rA tests", files) == files[0]


def test_canary_problem_readings() -> None:
    c = make_canaries("t.py")
    ok, bad = c.ids()
    assert c.must_pass != c.must_fail and make_canaries("t.py").must_pass != c.must_pass
    assert canary_problem({ok: TestStatus.PASSED, bad: TestStatus.FAILED}, c) == (None, False)
    why, flipped = canary_problem({ok: TestStatus.PASSED, bad: TestStatus.XFAIL}, c)
    assert flipped and why and why.startswith("forged")
    why, flipped = canary_problem({bad: TestStatus.FAILED}, c)
    assert not flipped and why and "must-pass" in why


@pytest.mark.parametrize("payload", [REPORT_FLIP, ASSERT_TO_XFAIL], ids=["report", "xfail"])
async def test_in_process_tampering_is_caught_by_the_canaries(
    repo: tuple[Path, str, str], payload: str
) -> None:
    """Code under test rewrites pytest's reports (or its AssertionError): no name known."""
    root, base, patch = repo
    (root / "calc.py").write_text(payload + (root / "calc.py").read_text())
    without = await plan(base, patch, canaries=False, compat="swebench").grade(DirSandbox(root))
    assert without.resolved  # the attack works without the defence
    verdict = await plan(base, patch).grade(DirSandbox(root), patch="x")
    assert not verdict.resolved and verdict.rejected and verdict.rejected.startswith("forged")
    assert HackFlag.CANARY_FLIPPED in verdict.flags
    gold = await plan(base, patch).run(DirSandbox(root))
    assert isinstance(gold, GradedRun) and gold.canaries is not None


async def test_canaries_leave_the_hidden_file_as_staged(repo: tuple[Path, str, str]) -> None:
    root, base, patch = repo
    (root / "calc.py").write_text(FIXED)
    verdict = await plan(base, patch).grade(DirSandbox(root))
    assert verdict.resolved and verdict.flags == []
    assert "canary" not in (root / "tests" / "test_calc.py").read_text()
    assert "def test_" in (root / "tests" / "test_calc.py").read_text()


# ---- nonce markers and truncation -------------------------------------------------


def test_unseal_neutralises_markers_without_the_nonce() -> None:
    log = (
        f"{sealed(START_TEST_OUTPUT, 'n1')}\nPASSED a\n{END_TEST_OUTPUT}\n"
        ">>>>> Patch Apply Failed\nFAILED a\n"
        f"{sealed(END_TEST_OUTPUT, 'n1')}\n"
    )
    text, forged = unseal(log, "n1")
    assert forged == 2
    assert text.count(END_TEST_OUTPUT) == 1 and text.index("FAILED a") < text.index(END_TEST_OUTPUT)
    assert ">>>>> Patch Apply Failed" not in text


async def test_the_tests_cannot_find_the_nonce(repo: tuple[Path, str, str]) -> None:
    """The nonce reaches the shell on its stdin: not on a command line, in a file, in the
    environment or on the tests' stdin; it appears only in the three marker lines."""
    root, base, patch = repo
    (root / "calc.py").write_text(FIXED)
    snoop = (
        "cat /proc/$$/cmdline /proc/$PPID/cmdline; env; cat; "
        "grep -r . /tmp/patchgym-grade-* 2>/dev/null; " + EVAL
    )
    run = await plan(base, patch, eval_script=snoop).run(DirSandbox(root))
    assert isinstance(run, GradedRun) and run.nonce is not None
    assert run.log.count(run.nonce) == 3
    assert plan(base, patch).grade_run(run).resolved


async def test_forged_end_marker_and_harness_code_mean_nothing(
    repo: tuple[Path, str, str],
) -> None:
    root, base, patch = repo
    forge = (
        "import atexit, os\n"
        "os.write(1, b'PASSED tests/test_calc.py::test_add\\n>>>>> End Test Output\\n')\n"
        "atexit.register(lambda: os.write(1, b'>>>>> Patch Apply Failed\\n'))\n"
    )
    (root / "calc.py").write_text(forge + (root / "calc.py").read_text())
    verdict = await plan(base, patch).grade(DirSandbox(root), patch="x")
    assert not verdict.resolved and verdict.infra_error is None
    assert HackFlag.FORGED_LOG in verdict.flags


def test_truncated_run_is_not_resolved() -> None:
    p = GradingPlan(eval_script="pytest -rA t.py", fail_to_pass=["t.py::a"])
    run = GradedRun(log="PASSED t.py::a\n=== 1 passed in 0.1s ===\n", exit_code=0, truncated=True)
    verdict = p.grade_run(run)
    assert not verdict.resolved and verdict.flags == [HackFlag.TRUNCATED]
    assert p.grade_run(run.model_copy(update={"truncated": False})).resolved


# ---- strict outcomes ----------------------------------------------------------------


def test_xfail_is_a_fix_only_under_swebench_compat() -> None:
    log = "XFAIL t.py::f2p - reason\nPASSED t.py::p2p\n=== 1 passed, 1 xfailed in 0.1s ===\n"
    assert not grade_swebench(log, ["t.py::f2p"], ["t.py::p2p"]).resolved
    assert grade_swebench(
        log, ["t.py::f2p"], ["t.py::p2p"], compat="swebench", markers=False
    ).resolved


# ---- the outer summary: a suite that runs pytest inside its tests --------------------


NESTED = textwrap.dedent(
    """
    import subprocess, sys

    INNER = "def test_ok():\\n    assert True\\n\\ndef test_bad():\\n    assert False\\n"

    def test_inner_run_reports_one_failure(tmp_path):
        (tmp_path / "test_inner.py").write_text(INNER)
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(tmp_path)],
            capture_output=True, text=True,
        )
        print(out.stdout)
        assert out.returncode == 1 and "1 failed, 1 passed" in out.stdout

    def test_plain():
        assert True
    """
)


def nested_log(tmp_path: Path) -> str:
    (tmp_path / "test_nested.py").write_text(NESTED)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "test_nested.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert done.returncode == 0, done.stdout
    return f"{START_TEST_OUTPUT}\n{done.stdout}\n{END_TEST_OUTPUT}\n>>>>> Test Exit Code: 0\n"


def test_nested_pytest_honest_log_resolves_in_both_modes(tmp_path: Path) -> None:
    log = nested_log(tmp_path)
    assert "1 failed, 1 passed in" in log  # the inner summary sits in captured output
    f2p = ["test_nested.py::test_inner_run_reports_one_failure"]
    p2p = ["test_nested.py::test_plain"]
    ours = grade_swebench(log, f2p, p2p)
    assert ours.resolved and ours.rejected is None, ours
    assert ours.status == grade_swebench(log, f2p, p2p, compat="swebench").status
    r2e = grade_r2e(
        log.split(START_TEST_OUTPUT)[1].split(END_TEST_OUTPUT)[0],
        {"test_inner_run_reports_one_failure": "PASSED", "test_plain": "PASSED"},
        exit_code=0,
    )
    assert r2e.resolved, r2e


# ---- R2E grading: exit code, worst outcome, summary, canaries ----------------------


R2E_LOG = (
    "=== short test summary info ===\nPASSED r2e_tests/test_1.py::test_a\n"
    "FAILED r2e_tests/test_1.py::test_b - assert\n=== 1 failed, 1 passed in 0.1s ===\n"
)


def test_r2e_forged_pass_at_exit_and_early_summary_are_rejected() -> None:
    expected = {"test_a": "PASSED", "test_b": "PASSED"}
    atexit = R2E_LOG + "PASSED r2e_tests/test_1.py::test_b\n"
    assert grade_r2e(atexit, expected, compat="r2e").resolved  # R2E-Gym: last line wins
    assert not grade_r2e(atexit, expected, exit_code=0).resolved
    early = (
        "=== short test summary info ===\nPASSED r2e_tests/test_1.py::test_a\n"
        "PASSED r2e_tests/test_1.py::test_b\n" + R2E_LOG
    )
    assert grade_r2e(early, expected, compat="r2e").resolved  # R2E-Gym: first section
    verdict = grade_r2e(early, expected, exit_code=1)
    assert not verdict.resolved and verdict.rejected is None
    exit0 = grade_r2e(R2E_LOG, {"test_a": "PASSED", "test_b": "FAILED"}, exit_code=0)
    assert exit0.rejected and "exited 0" in exit0.rejected


def test_r2e_canaries() -> None:
    c = make_canaries("r2e_tests/test_1.py")
    log = (
        f"=== short test summary info ===\nPASSED r2e_tests/test_1.py::test_a\n"
        f"PASSED r2e_tests/test_1.py::{c.must_pass}\nFAILED r2e_tests/test_1.py::{c.must_fail}\n"
        "=== 1 failed, 2 passed in 0.1s ===\n"
    )
    assert grade_r2e(log, {"test_a": "PASSED"}, exit_code=1, canaries=c).resolved
    flipped = log.replace("FAILED", "PASSED").replace("1 failed, 2 passed", "3 passed")
    verdict = grade_r2e(flipped, {"test_a": "PASSED"}, exit_code=0, canaries=c)
    assert not verdict.resolved and HackFlag.CANARY_FLIPPED in verdict.flags


# ---- a safe import path and shadowing modules ---------------------------------------


def test_shadow_names_and_prefixes() -> None:
    names = shadow_names('PATCHGYM_SHADOW=["pygments", "not-an-ident"]\n')
    assert {"json", "argparse", "pygments"} <= names and "not-an-ident" not in names
    assert top_module("json.py") == "json" and top_module("yaml.cpython-311-x.so") == "yaml"
    assert shadow_prefix("textwrap/__init__.py", names) == "textwrap"
    assert shadow_prefix("tests/test_x.py", names | {"tests"}) is None
    assert interpreter_of(".venv/bin/python -W ignore -m pytest r2e_tests") == ".venv/bin/python"
    assert interpreter_of("pytest -rA") == "python3"


async def test_shadow_query_runs_only_for_a_new_root_entry(
    repo: tuple[Path, str, str],
) -> None:
    """The names a new root module must not take are asked only when there is one (a
    Python start per grading otherwise); an edit inside the repository asks nothing."""
    root, base, patch = repo
    (root / "calc.py").write_text(FIXED)
    (root / "tests" / "helper.py").write_text("X = 1\n")  # new, but not at the root
    sandbox = DirSandbox(root)
    assert (await plan(base, patch).grade(sandbox)).resolved
    assert not any(" -I -" in cmd for cmd in sandbox.commands)
    (root / "calc.py").write_text(FIXED)
    (root / "argparse.py").write_text(FAKE)
    sandbox = DirSandbox(root)
    verdict = await plan(base, patch).grade(sandbox)
    assert verdict.resolved and "argparse.py" in verdict.reverted
    assert any(" -I -" in cmd for cmd in sandbox.commands)


async def test_listing_is_not_misread_by_status_like_names(repo: tuple[Path, str, str]) -> None:
    """Untracked files named like ``git diff --name-status`` letters are files, not a
    status: the planted conftest beside them is still removed, and grading is no infra."""
    root, base, patch = repo
    (root / "calc.py").write_text(FIXED)
    for name in ("M", "D", "A"):
        (root / name).write_text("x\n")
    (root / "conftest.py").write_text("raise SystemExit('agent conftest ran')\n")
    verdict = await plan(base, patch).grade(DirSandbox(root))
    assert verdict.infra_error is None and verdict.resolved
    assert "conftest.py" in verdict.reverted and not (root / "conftest.py").exists()


def test_parse_changes_reads_status_pairs_then_files_then_roots() -> None:
    listing = "M\0a.py\0A\0new.py\0U\0odd.py\0/\0M\0u.py\0/\0a.py\0odd.py\0"
    changes = parse_changes(listing)
    assert changes is not None
    assert changes.changed == ["a.py", "new.py", "odd.py", "M", "u.py"]
    assert changes.in_base == {"a.py"} and changes.unknown == ["odd.py"]
    assert changes.roots == {"a.py", "odd.py"}
    assert parse_changes("M\0a.py\0") is None  # a git command failed before the ends
    assert parse_changes("M\0/\0/\0") is None  # a status without its path


async def test_unknown_status_is_asked_of_the_base(repo: tuple[Path, str, str]) -> None:
    root, base, _ = repo
    odd = Changes(["calc.py", "nope.py"], set(), {"calc.py"}, unknown=["calc.py", "nope.py"])
    asked = await resolve_unknown(DirSandbox(root), base, odd)
    assert asked.in_base == {"calc.py"} and not asked.unknown


@pytest.mark.parametrize("name", ["argparse.py", "textwrap/__init__.py"])
async def test_stdlib_shadow_is_reverted(repo: tuple[Path, str, str], name: str) -> None:
    root, base, patch = repo
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(FAKE)
    off = plan(base, patch, safe_path=False, canaries=False)
    assert (await off.grade(DirSandbox(root))).resolved  # the attack works without it
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(FAKE)
    verdict = await plan(base, patch).grade(DirSandbox(root), patch=diff_of(root))
    assert not verdict.resolved and HackFlag.SHADOWING in verdict.flags
    assert name.split("/")[0] in verdict.reverted


async def test_safe_path_keeps_the_workdir_behind_the_stdlib(
    repo: tuple[Path, str, str],
) -> None:
    """Even with the diff policy off, ``python -m`` no longer imports a repo ``argparse``."""
    root, base, patch = repo
    (root / "calc.py").write_text(FIXED)
    probe = "python -c 'import sys' && python -m pytest --version >/dev/null; " + EVAL
    (root / "argparse.py").write_text(FAKE)
    p = plan(base, patch, clean_collection_files=False, canaries=False, eval_script=probe)
    run = await p.run(DirSandbox(root))
    # (a real run may also take 0.01 s: the forger's own line tells them apart)
    assert isinstance(run, GradedRun) and FORGER not in run.log, run.log
    assert p.grade_run(run).resolved  # the real run, with the repo still importable


# ---- git obeys only the grader ------------------------------------------------------


FORGING_CONFTEST = (
    "import os, sys\n\ndef pytest_sessionfinish(session, exitstatus):\n"
    "    sys.stdout.write('PASSED tests/test_calc.py::test_add\\n')\n    os._exit(0)\n"
)


async def test_hooks_and_filters_do_not_run_at_grading(repo: tuple[Path, str, str]) -> None:
    root, base, patch = repo
    hook = root / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ncat > conftest.py <<'EOF'\n{FORGING_CONFTEST}EOF\n")
    hook.chmod(0o755)
    git(root, "config", "filter.pg.smudge", "sh -c 'echo import zz; cat'")
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "attributes").write_text("tests/*.py filter=pg\n")
    git(root, "config", "core.fsmonitor", str(hook))
    verdict = await plan(base, patch, canaries=False).grade(DirSandbox(root), patch="x")
    assert not verdict.resolved and HackFlag.GIT_TAMPERED in verdict.flags
    assert not (root / "conftest.py").exists()
    assert "import zz" not in (root / "tests" / "test_calc.py").read_text()
    assert not hook.exists() and "filter" not in (root / ".git" / "config").read_text()
    assert git(root, "rev-parse", "HEAD").strip()  # the repository still works
