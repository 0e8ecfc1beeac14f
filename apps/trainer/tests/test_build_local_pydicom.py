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
import re
import subprocess
from pathlib import Path

import pytest
from sdist_rows import git_env, sdist_repo

from patchgym_envs.localbuild.errors import Unbuildable
from patchgym_envs.localbuild.pythons import find_python
from patchgym_trainer.cli import main

HERE = Path(__file__).parent / "localbuild"
ROW = json.loads((HERE / "pydicom.jsonl").read_text())
AS_OF = "2020-11-05T00:00:00Z"
F2P = json.loads(ROW["FAIL_TO_PASS"])
P2P = json.loads(ROW["PASS_TO_PASS"])
TEST_FILE = "pydicom/tests/test_json.py"
STATUS = re.compile(r"^(PASSED|FAILED|ERROR) (\S+)")


def run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as code:
        main(argv)
    return int(code.value.code or 0)


@pytest.fixture(scope="module")
def python39() -> str:
    try:
        return find_python("3.9")
    except Unbuildable as exc:
        pytest.skip(f"the harness spec for pydicom 2.1 needs Python 3.9: {exc}")


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


class GroundTruth:
    """The row's test file in a plain venv: the era's numpy/pytest, ``pip install -e .``."""

    def __init__(self, mirror: Path, root: Path, python: str) -> None:
        self.repo = root / "checkout"
        subprocess.run(["git", "clone", "-q", str(mirror), str(self.repo)], check=True)
        venv = root / "venv"
        self.python = str(venv / "bin" / "python")
        subprocess.run(["uv", "venv", "-q", "--python", python, str(venv)], check=True)
        subprocess.run(
            ["uv", "pip", "install", "-q", "--python", self.python, "--exclude-newer", AS_OF,
             "pip", "setuptools", "wheel", "numpy", "pytest"],
            check=True,
        )  # fmt: skip
        subprocess.run(
            [self.python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
             "-e", "."],
            cwd=self.repo, check=True, capture_output=True,
        )  # fmt: skip

    def statuses(self, patch: str) -> dict[str, str]:
        git = ["git", "-c", "core.hooksPath=/dev/null"]
        env = git_env("2020-11-05T00:00:00+00:00")
        subprocess.run([*git, "checkout", "-q", "--", "."], cwd=self.repo, check=True, env=env)
        for diff in (patch, ROW["test_patch"]):
            if diff.strip():
                subprocess.run(
                    [*git, "apply", "-"], cwd=self.repo, input=diff, text=True, check=True
                )
        done = subprocess.run(
            [self.python, "-m", "pytest", "-rA", "-p", "no:cacheprovider", TEST_FILE],
            cwd=self.repo, capture_output=True, text=True, check=False,
        )  # fmt: skip
        out = {}
        for line in done.stdout.splitlines():
            m = STATUS.match(line)
            if m:
                out[m.group(2)] = m.group(1)
        return out

    def resolved(self, patch: str) -> bool:
        got = self.statuses(patch)
        return all(got.get(t) == "PASSED" for t in (*F2P, *P2P))


@pytest.fixture(scope="module")
def truth(mirror: Path, python39: str, tmp_path_factory: pytest.TempPathFactory) -> GroundTruth:
    return GroundTruth(mirror, tmp_path_factory.mktemp("truth"), python39)


@pytest.fixture(scope="module")
def built(mirror: Path, python39: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("built")
    code = run(
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
    assert truth.resolved(ROW["patch"]) is True
    assert truth.resolved("") is False
    assert truth.resolved(regression) is False
    code = run(
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
    code = run(
        ["validate", "dataset=file", f"dataset.path={bad}", "validate.patches=[gold]",
         "--out", str(tmp_path / "r")]
    )  # fmt: skip
    (row,) = [json.loads(x) for x in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    assert code == 1 and row["resolved"] is False and row["reward"] == 0.0
    assert row["p2p"] == f"{len(P2P) - 2}/{len(P2P)}"  # the two tests the regression breaks
