"""A real row whose test file needs the network, with a plain venv as ground truth.

The row (``localbuild/pydicom_network.jsonl``) is pydicom's fix released in 2.2.1:
``dcmread(stop_before_pixels=True)`` also stops at Float and Double Float Pixel Data. The
repository is the released 2.2.0 sdist committed with fixed dates, the gold patch 2.2.1's
``pydicom/filereader.py`` change and the test patch 2.2.1's ``test_filereader.py`` change.

``test_filereader.py`` fetches test files from GitHub (pydicom's data manager); the sandbox
has no network, and the plain venv runs the tests in a network namespace of their own, so
the downloads fail in both. One PASS_TO_PASS test downloads inside its own body: its
failure shows the network error (pydicom's retry lines in its captured output). The build
must drop exactly that test, with that evidence in the report, keep every other test, pass
the parity gate, and grade gold, empty and gold-plus-regression as the plain venv does on
the kept tests. About 8 minutes: each run of the file waits ~3.5 min on download retries
(ground truth and build run at once).
"""

from __future__ import annotations

import gzip
import json
import subprocess
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from plain_venv import GroundTruth, cli, python_or_skip
from sdist_rows import sdist_repo

from patchgym_envs.localbuild.network import network_failures

HERE = Path(__file__).parent / "localbuild"
ROW = json.loads((HERE / "pydicom_network.jsonl").read_text())
AS_OF = "2021-08-26T00:00:00Z"
F2P = json.loads(ROW["FAIL_TO_PASS"])
P2P = json.loads(ROW["PASS_TO_PASS"])
NETWORK_TEST = "pydicom/tests/test_filereader.py::TestReader::test_sequence_with_implicit_vr"
REGRESSION = (HERE / "pydicom_network_gold_plus_regression.diff").read_text()


@pytest.fixture(scope="module")
def python39() -> str:
    return python_or_skip("3.9", "the harness spec for pydicom 2.2")


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sdist_repo(
        "pydicom==2.2.0",
        tmp_path_factory.mktemp("pydicom22"),
        date="2021-08-05T17:53:41+00:00",
        message="pydicom 2.2.0 (sdist)",
        base_commit=ROW["base_commit"],
    )


@pytest.fixture(scope="module")
def truth(mirror: Path, python39: str, tmp_path_factory: pytest.TempPathFactory) -> GroundTruth:
    if subprocess.run(["unshare", "--map-root-user", "--net", "true"]).returncode != 0:
        pytest.skip("the ground truth runs offline in a network namespace: unshare -rn fails here")
    root = tmp_path_factory.mktemp("truth")
    return GroundTruth(ROW, mirror, root, python39, as_of=AS_OF, offline=True)


@pytest.fixture(scope="module")
def truth_logs(truth: GroundTruth) -> Future[dict[str, str]]:
    """The plain venv's logs under gold, empty and gold-plus-regression, taken while the
    build runs (each waits on pydicom's download retries, not on the CPU)."""
    patches = {"gold": ROW["patch"], "empty": "", "regression": REGRESSION}
    pool = ThreadPoolExecutor(1)

    def logs() -> dict[str, str]:
        with ThreadPoolExecutor(len(patches)) as each:
            runs = {n: each.submit(truth.log, p, n) for n, p in patches.items()}
            return {n: r.result() for n, r in runs.items()}

    future = pool.submit(logs)
    pool.shutdown(wait=False)
    return future


@pytest.fixture(scope="module")
def built(
    mirror: Path, truth_logs: Future[dict[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    out = tmp_path_factory.mktemp("built")
    code = cli(
        [
            "datasets", "build-local", "dataset=file",
            f"dataset.path={HERE / 'pydicom_network.jsonl'}",
            "--out", str(out), "--cache-dir", str(out / "cache"),
            "--mirror", f"{ROW['repo']}={mirror}",
        ]
    )  # fmt: skip
    assert code == 0, (out / "report.md").read_text()
    return out


def test_triage_drops_exactly_the_test_that_shows_a_network_error(built: Path) -> None:
    report = json.loads((built / "report.json").read_text())
    (outcome,) = report["outcomes"]
    assert outcome["status"] == "built", outcome["reason"]
    assert list(outcome["network_tests"]) == [NETWORK_TEST]
    evidence = outcome["network_tests"][NETWORK_TEST]
    assert "urlopen error" in evidence, evidence
    assert outcome["gate"] == (
        f"ok: gold passes {len(F2P) + len(P2P) - 1} kept tests, empty fails 1 FAIL_TO_PASS; "
        "1 dropped"
    )
    assert (
        f"| {ROW['instance_id']} | {NETWORK_TEST} | {evidence} |"
        in (built / "report.md").read_text()
    )
    (task,) = [json.loads(x) for x in (built / "tasks.jsonl").read_text().splitlines()]
    assert task["fail_to_pass"] == F2P
    assert task["pass_to_pass"] == [t for t in P2P if t != NETWORK_TEST]
    assert report["envs"][outcome["env_key"]]["packages"]["pytest"] == "6.2.4"


def test_ground_truth_fails_the_dropped_test_for_the_network_alone(
    built: Path, truth: GroundTruth, truth_logs: Future[dict[str, str]]
) -> None:
    """In the plain venv too, the one row test gold fails is the dropped one, and its own
    failure shows the network error; empty fails only FAIL_TO_PASS (and that test)."""
    logs = truth_logs.result(timeout=1800)
    gold = truth.statuses_of(logs["gold"])
    row_tests = [*F2P, *P2P]
    assert [t for t in row_tests if gold.get(t) != "PASSED"] == [NETWORK_TEST]
    assert list(network_failures(logs["gold"], [NETWORK_TEST])) == [NETWORK_TEST]
    empty = truth.statuses_of(logs["empty"])
    assert [t for t in row_tests if empty.get(t) != "PASSED"] == [*F2P, NETWORK_TEST]


def test_ground_truth_and_build_agree(
    built: Path, truth: GroundTruth, truth_logs: Future[dict[str, str]], tmp_path: Path
) -> None:
    """gold, empty, gold-plus-regression (Pixel Data's tag mistyped): on the kept tests the
    plain venv and the build give the same verdicts, and the regression scores 0."""
    (task,) = [json.loads(x) for x in (built / "tasks.jsonl").read_text().splitlines()]
    kept = [*task["fail_to_pass"], *task["pass_to_pass"]]
    logs = truth_logs.result(timeout=1800)
    truths = {
        n: all(truth.statuses_of(log).get(t) == "PASSED" for t in kept) for n, log in logs.items()
    }
    assert truths == {"gold": True, "empty": False, "regression": False}
    bad = {**task, "id": f"{task['id']}.regression", "gold_patch": REGRESSION}
    rows_in = tmp_path / "rows.jsonl"
    rows_in.write_text(json.dumps(task) + "\n" + json.dumps(bad) + "\n")
    cli(["validate", "dataset=file", f"dataset.path={rows_in}", "--out", str(tmp_path / "v")])
    rows = [json.loads(x) for x in (tmp_path / "v" / "results.jsonl").read_text().splitlines()]
    got = {(r["task_id"], r["patch"]): r["resolved"] for r in rows}
    assert got == {
        (task["id"], "gold"): True,
        (task["id"], "empty"): False,
        (bad["id"], "gold"): False,
        (bad["id"], "empty"): False,
    }, rows
    (regressed,) = [r for r in rows if r["task_id"] == bad["id"] and r["patch"] == "gold"]
    assert regressed["reward"] == 0.0
    assert regressed["log"], regressed
    built_log = gzip.decompress((tmp_path / "v" / regressed["log"]).read_bytes()).decode(
        errors="replace"
    )
    failing = {
        where: [t for t in kept if truth.statuses_of(log).get(t) != "PASSED"]
        for where, log in (("plain venv", logs["regression"]), ("build", built_log))
    }
    assert failing["build"] == failing["plain venv"], failing
    p2p = task["pass_to_pass"]
    broken = [t for t in failing["plain venv"] if t in p2p]
    assert broken, "the regression breaks no PASS_TO_PASS test"
    assert regressed["p2p"] == f"{len(p2p) - len(broken)}/{len(p2p)}"
