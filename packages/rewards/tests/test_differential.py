"""Our grading vs the ``swebench`` 5.0.2 harness on every log of the real corpus.

For each log, grading cases are derived from the ids the harness itself parses:
each id alone as FAIL_TO_PASS and as PASS_TO_PASS, ids truncated mid-parameter,
an id that is absent, and seeded random mixes, under both eval types. Verdicts,
resolution status and the per-test success/failure lists must be identical.

Intended differences (hardening; each is asserted separately below):

1. ``non_utf8`` — the harness reads the log with strict UTF-8 and raises
   ``UnicodeDecodeError``; we decode with replacement. The harness is therefore
   given the replacement-decoded text.
2. ``ansi`` — the harness does not strip ANSI colour codes, so a ``--color=yes``
   log parses to nothing and counts as "no evidence the suite ran"; we strip them
   and grade the run. The harness is given the decoloured text.
3. ``rejected`` vs ``infra``: where the harness says "not found" we say either
   ``infra_error`` (log proves nothing: mask it) or ``rejected`` (log contradicts
   itself or timed out: reward 0). Both are "not found" here.
4. ``strict`` — a FAIL_TO_PASS test must reach its gold outcome, PASSED: an XFAIL
   F2P test counts as fixed only under ``compat="swebench"``. Real tasks' F2P tests
   ran in the gold run and did not XFAIL, so the default-mode comparison below draws
   F2P ids from the tests the log reports as anything but XFAIL.
5. Not exercised by real logs (see test_swebench.py): a status token glued to
   other text (``PASSEDfoo x``) is ignored instead of recorded as status
   ``PASSEDfoo``; a bare ``\\r`` ends a line; the exit code is read only after the
   last end marker; ``FAIL:`` alone on a line does not crash the Django parser.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from rewards_corpus import corpus_cases, corpus_log

from patchgym_rewards import EvalType, TestRole, grade_swebench, resolve_id
from patchgym_rewards.markers import has_markers
from patchgym_rewards.swebench import read_status_map
from patchgym_rewards.text import normalize, strip_ansi

harness = pytest.importorskip("swebench.harness.grading", reason="swebench==5.0.2 not installed")
from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS  # noqa: E402
from swebench.harness.constants import EvalType as HarnessEvalType  # noqa: E402
from swebench.types import TestSpec as HarnessSpec  # noqa: E402

CASES = corpus_cases()


def harness_text(name: str, case: dict[str, Any]) -> str:
    text = corpus_log(name).decode("utf-8", errors="replace")
    if case.get("differs") == "ansi":
        text = strip_ansi(text)
    return text


def harness_grade(
    path: Path, parser: str, f2p: list[str], p2p: list[str], eval_type: str
) -> dict[str, Any]:
    spec = HarnessSpec(
        instance_id="corpus",
        image="",
        eval_script_list=[],
        repo="",
        version="",
        FAIL_TO_PASS=f2p,
        PASS_TO_PASS=p2p,
        log_parser=f"parse_log_{parser}",
        eval_type=eval_type,
    )
    status_map, found = harness.get_logs_eval(spec, str(path))
    if not found:
        return {"found": False}
    report = harness.get_eval_tests_report(
        status_map, {FAIL_TO_PASS: f2p, PASS_TO_PASS: p2p}, eval_type=HarnessEvalType(eval_type)
    )
    return {
        "found": True,
        "status": harness.get_resolution_status(report),
        "f2p": report[FAIL_TO_PASS],
        "p2p": report[PASS_TO_PASS],
    }


def grading_cases(name: str, ids: list[str]) -> list[tuple[list[str], list[str]]]:
    truncated = [i[: i.index("[") + 2] for i in ids if "[" in i and not i.endswith("[]")]
    pool = [*ids, *truncated, "tests/test_missing.py::test_absent"]
    combos: list[tuple[list[str], list[str]]] = []
    for one in pool:
        combos += [([one], []), ([], [one])]
    rng = random.Random(name)
    for _ in range(25):
        picked = rng.sample(pool, k=min(len(pool), rng.randint(1, 6)))
        cut = rng.randint(0, len(picked))
        combos.append((picked[:cut], picked[cut:]))
    combos.append((ids, []))
    combos.append(([], ids))
    return combos


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_status_map(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    text = harness_text(name, case)
    ours = read_status_map(normalize(corpus_log(name)), case["parser"])
    parse = harness.PARSER_REGISTRY[f"parse_log_{case['parser']}"]
    if has_markers(text):
        start, end = ">>>>> Start Test Output", ">>>>> End Test Output"
        theirs = parse(text.split(start)[1].split(end)[0], None) or parse(text, None)
    else:
        theirs = parse(text, None)
    assert {k: str(v) for k, v in ours.items()} == theirs
    assert list(ours) == list(theirs), "insertion order decides truncated-id matches"


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_verdicts(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    path = tmp_path / "test_output.txt"
    path.write_text(harness_text(name, case))
    ids = list(read_status_map(normalize(corpus_log(name)), case["parser"]))
    if "f2p" in case:
        combos = [(case["f2p"], case["p2p"])]
    else:
        combos = grading_cases(name, ids)
    compared = 0
    for eval_type in ("pass_and_fail", "fail_only"):
        for f2p, p2p in combos:
            theirs = harness_grade(path, case["parser"], f2p, p2p, eval_type)
            ours = grade_swebench(
                corpus_log(name),
                f2p,
                p2p,
                log_parser=case["parser"],
                eval_type=eval_type,
                compat="swebench",
            )
            where = f"{name} {eval_type} F2P={f2p} P2P={p2p}"
            found = ours.infra_error is None and ours.rejected is None
            assert found == theirs["found"], where
            if not found:
                continue
            assert ours.status.value == theirs["status"], where
            assert ours.resolved == (theirs["status"] == "RESOLVED_FULL"), where
            for role, key in ((TestRole.FAIL_TO_PASS, "f2p"), (TestRole.PASS_TO_PASS, "p2p")):
                tests = [t for t in ours.tests if t.role is role]
                assert [t.name for t in tests if t.ok] == theirs[key]["success"], where
                assert [t.name for t in tests if not t.ok] == theirs[key]["failure"], where
            compared += 1
    assert compared or "expect" in case


def test_expected_outcomes_of_adversarial_logs() -> None:
    for name, case in CASES.items():
        if "expect" not in case:
            continue
        verdict = grade_swebench(
            corpus_log(name), case["f2p"], case["p2p"], log_parser=case["parser"]
        )
        expect = case["expect"]
        if expect == "rejected":
            assert verdict.rejected and not verdict.resolved, name
        elif expect == "infra":
            assert verdict.infra_error and not verdict.resolved, name
        elif expect == "resolved":
            assert verdict.resolved, name
        else:
            assert not verdict.resolved and verdict.infra_error is None, name


def test_intended_difference_ansi() -> None:
    """The harness cannot read a coloured log; we grade it like the plain one."""
    raw = corpus_log("pytest_rA_color").decode()
    assert "\x1b[" in raw
    sm = harness.PARSER_REGISTRY["parse_log_pytest"](raw, None)
    assert "tests/test_basic.py::test_pass" not in sm
    ours = grade_swebench(raw, ["tests/test_basic.py::test_pass"], [])
    assert ours.resolved


def test_intended_difference_non_utf8(tmp_path: Path) -> None:
    """The harness's strict read raises on invalid UTF-8; we grade the run."""
    data = corpus_log("pytest_non_utf8")
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    path = tmp_path / "log.txt"
    path.write_bytes(data)
    spec = HarnessSpec("x", "", [], "", "", [], [], "parse_log_pytest", "pass_and_fail")
    with pytest.raises(UnicodeDecodeError):
        harness.get_logs_eval(spec, str(path))
    ours = grade_swebench(data, ["tests/test_bytes.py::test_prints_bad_bytes"], [])
    assert ours.resolved and ours.infra_error is None


def test_eval_type_values_agree() -> None:
    assert {e.value for e in EvalType} == {e.value for e in HarnessEvalType}


JEST_LOG = """
 PASS  src/__tests__/math.test.js
  math
    ✓ adds numbers (3 ms)
    ✕ subtracts numbers (12 ms)
    ○ skipped multiplies
    ✓ handles (parens) in names
Tests:       1 failed, 1 skipped, 2 passed, 4 total
"""


def test_jest_parser_matches_harness() -> None:
    from patchgym_rewards import parse_log

    ours = {k: str(v) for k, v in parse_log(JEST_LOG, "jest").items()}
    assert ours == harness.PARSER_REGISTRY["parse_log_jest"](JEST_LOG, None)
    assert ours["adds numbers"] == "PASSED" and len(ours) == 4


@pytest.mark.parametrize("name", sorted(CASES))
def test_default_mode_agrees_with_compat_on_honest_logs(name: str, tmp_path: Path) -> None:
    """Worst-outcome merging, the summary check and strict outcomes reject no honest log."""
    assert default_mode_disagreements(name, tmp_path) == []


def default_mode_cases(name: str, eval_type: str) -> list[tuple[list[str], list[str]]]:
    """Every grading case of ``test_same_verdicts`` whose F2P tests a real task could have."""
    case = CASES[name]
    status_map = read_status_map(normalize(corpus_log(name)), case["parser"])
    if "f2p" in case:
        return [(case["f2p"], case["p2p"])]
    ids = list(status_map)

    def key(test: str) -> str | None:  # fail_only matches exact ids only
        return (
            resolve_id(test, status_map)
            if eval_type == "pass_and_fail"
            else (test if test in status_map else None)
        )

    def ran(test: str) -> bool:  # a real task's tests all ran in the gold run
        return key(test) is not None

    def gold_passes(test: str) -> bool:  # ... and its F2P tests did not XFAIL
        found = key(test)
        return found is not None and status_map[found] != "XFAIL"

    return [
        (f2p, p2p)
        for f2p, p2p in grading_cases(name, ids)
        if all(map(gold_passes, f2p)) and all(map(ran, p2p))
    ]


def default_mode_disagreements(name: str, tmp_path: Path) -> list[str]:
    """Cases where the default mode's verdict differs from swebench 5.0.2's.

    Compared directly with the harness wherever it reads the log (its markers are
    there); elsewhere with ``compat="swebench"`` (proved equal to the harness above).
    Same resolution, and the same per-test successes when neither run was rejected.
    """
    case = CASES[name]
    if "expect" in case:
        return []  # adversarial logs: the default mode rejects them on purpose
    path = tmp_path / f"{name}.txt"
    path.write_text(harness_text(name, case))
    out = []
    for eval_type in ("pass_and_fail", "fail_only"):
        for f2p, p2p in default_mode_cases(name, eval_type):
            kwargs: dict[str, Any] = {"log_parser": case["parser"], "eval_type": eval_type}
            ours = grade_swebench(corpus_log(name), f2p, p2p, **kwargs)
            theirs = harness_grade(path, case["parser"], f2p, p2p, eval_type)
            if theirs["found"]:
                same = ours.status.value == theirs["status"]
                if same and ours.rejected is None:
                    ok = [t.name for t in ours.tests if t.ok]
                    same = ok == theirs["f2p"]["success"] + theirs["p2p"]["success"]
            else:
                compat = grade_swebench(corpus_log(name), f2p, p2p, compat="swebench", **kwargs)
                same = (ours.resolved, ours.status) == (compat.resolved, compat.status)
                if same and ours.rejected is None and compat.rejected is None:
                    same = [t.ok for t in ours.tests] == [t.ok for t in compat.tests]
            if not same:
                out.append(f"{name} {eval_type} F2P={f2p} P2P={p2p}")
    return out


def test_default_mode_agreement_count(tmp_path: Path) -> None:
    """The number the issue asks for: default-mode agreement over every honest case."""
    total = sum(
        len(default_mode_cases(n, e))
        for n in CASES
        if "expect" not in CASES[n]
        for e in ("pass_and_fail", "fail_only")
    )
    bad = [d for n in sorted(CASES) for d in default_mode_disagreements(n, tmp_path)]
    print(f"default mode agrees with swebench 5.0.2 on {total - len(bad)} of {total} cases")
    assert not bad and total > 300
