"""A second real repository: pydicom, with the harness's own install spec and a plain venv
as ground truth in the same test.

The row (``localbuild/pydicom.jsonl``) is upstream pydicom issue #1254, fixed in 2.1.1
("Fix converting Sequences with Bulk Data when loading from JSON"): the repository is the
released 2.1.0 sdist committed with fixed dates, the gold patch is 2.1.1's
``pydicom/jsonrep.py`` change and the test patch 2.1.1's ``test_json.py`` change. The
build uses SWE-bench's spec for pydicom 2.1 (Python 3.9, unpinned numpy and pytest), so
every package resolves as of the row's date; today's setuptools has no ``pkg_resources``,
which pydicom 2.1 imports, so an undated build cannot even collect the tests.

Ground truth: a plain venv (the era's packages, the repository installed by its own pip)
runs the same test file under gold, empty and gold-plus-regression; the build's verdicts
must match, and the regression must score 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from plain_venv import GroundTruth, cli, python_or_skip
from sdist_rows import sdist_repo

HERE = Path(__file__).parent / "localbuild"
ROW = json.loads((HERE / "pydicom.jsonl").read_text())
AS_OF = "2020-11-05T00:00:00Z"
F2P = json.loads(ROW["FAIL_TO_PASS"])
P2P = json.loads(ROW["PASS_TO_PASS"])


@pytest.fixture(scope="module")
def python39() -> str:
    return python_or_skip("3.9", "the harness spec for pydicom 2.1")


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pydicom")
    return sdist_repo(
        "pydicom==2.1.0",
        root,
        date="2020-11-02T16:41:12+00:00",
        message="pydicom 2.1.0 (sdist)",
        base_commit=ROW["base_commit"],
    )


@pytest.fixture(scope="module")
def truth(mirror: Path, python39: str, tmp_path_factory: pytest.TempPathFactory) -> GroundTruth:
    return GroundTruth(ROW, mirror, tmp_path_factory.mktemp("truth"), python39, as_of=AS_OF)


@pytest.fixture(scope="module")
def built(mirror: Path, python39: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("built")
    code = cli(
        [
            "datasets", "build-local", "dataset=file", f"dataset.path={HERE / 'pydicom.jsonl'}",
            "--out", str(out), "--cache-dir", str(out / "cache"),
            "--mirror", f"{ROW['repo']}={mirror}",
        ]
    )  # fmt: skip
    assert code == 0, (out / "report.md").read_text()
    return out


def test_build_passes_the_parity_gate_pinned_in_time(built: Path) -> None:
    report = json.loads((built / "report.json").read_text())
    (outcome,) = report["outcomes"]
    assert outcome["status"] == "built", outcome["reason"]
    assert (
        outcome["gate"]
        == f"ok: gold passes {len(F2P) + len(P2P)} kept tests, empty fails 1 FAIL_TO_PASS; 0 dropped"
    )
    assert outcome["as_of"] == AS_OF
    packages = report["envs"][outcome["env_key"]]["packages"]
    assert packages["pytest"] == "6.1.2" and packages["numpy"] == "1.19.4"
    assert packages["setuptools"] == "50.3.2"  # has pkg_resources, which pydicom 2.1 imports


def test_ground_truth_and_build_agree(built: Path, truth: GroundTruth, tmp_path: Path) -> None:
    """gold, empty, gold-plus-regression: the plain venv and the build give the same verdicts;
    the regression (a PN component read from the wrong key) scores 0 on the default build."""
    regression = (HERE / "pydicom_gold_plus_regression.diff").read_text()
    truths = truth.verdicts({"gold": ROW["patch"], "empty": "", "regression": regression})
    assert {n: truth.resolved_by(s) for n, s in truths.items()} == {
        "gold": True,
        "empty": False,
        "regression": False,
    }
    code = cli(
        ["validate", "dataset=file", f"dataset.path={built / 'tasks.jsonl'}",
         "--out", str(tmp_path / "v")]
    )  # fmt: skip
    rows = [json.loads(x) for x in (tmp_path / "v" / "results.jsonl").read_text().splitlines()]
    assert code == 0, rows
    assert {r["patch"]: r["resolved"] for r in rows} == {"gold": True, "empty": False}
    (task,) = [json.loads(x) for x in (built / "tasks.jsonl").read_text().splitlines()]
    task["gold_patch"] = regression
    bad = tmp_path / "regression.jsonl"
    bad.write_text(json.dumps(task) + "\n")
    code = cli(
        ["validate", "dataset=file", f"dataset.path={bad}", "validate.patches=[gold]",
         "--out", str(tmp_path / "r")]
    )  # fmt: skip
    (row,) = [json.loads(x) for x in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    assert code == 1 and row["resolved"] is False and row["reward"] == 0.0
    assert row["p2p"] == f"{len(P2P) - 2}/{len(P2P)}"  # the two tests the regression breaks
