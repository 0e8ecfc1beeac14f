"""``patchgym datasets build-local`` on a real instance built from PyPI sources, then
``patchgym validate`` on the tasks it wrote: gold resolves, empty does not, no Docker.

The repository is the released semver 3.0.1 sdist committed with fixed dates (see
tests/localbuild/README.md); pip downloads it from the package index, as CI can.
"""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import pytest
from sdist_rows import sdist_repo

from patchgym_trainer.cli import main

HERE = Path(__file__).parent / "localbuild"
ROW = json.loads((HERE / "semver.jsonl").read_text())


def run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as code:
        main(argv)
    return int(code.value.code or 0)


def semver_repo(root: Path) -> Path:
    """semver 3.0.1's sdist committed with fixed dates: always the row's base commit."""
    return sdist_repo(
        "semver==3.0.1",
        root,
        date="2023-06-14T11:20:42+00:00",
        message="semver 3.0.1 (sdist)",
        base_commit=ROW["base_commit"],
    )


@pytest.fixture(scope="module")
def semver_mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return semver_repo(tmp_path_factory.mktemp("semver"))


@pytest.fixture(scope="module")
def built(semver_mirror: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("built")
    code = run(
        [
            "datasets", "build-local", "dataset=file", f"dataset.path={HERE / 'semver.jsonl'}",
            "--out", str(out), "--cache-dir", str(out / "cache"),
            "--mirror", f"{ROW['repo']}={semver_mirror}", "--specs", str(HERE / "specs.yaml"),
        ]
    )  # fmt: skip
    assert code == 0
    return out


def test_build_local_writes_a_runnable_task(built: Path) -> None:
    (task,) = [json.loads(x) for x in (built / "tasks.jsonl").read_text().splitlines()]
    assert task["id"] == ROW["instance_id"]
    env = task["metadata"]["local_env"]
    assert task["env"]["PATH"].startswith(env["path"] + "/bin:")
    assert Path(task["template"], ".git").is_dir()
    assert "conda" not in task["eval_script"]
    assert "tests/test_subclass.py" in task["eval_script"]
    report = json.loads((built / "report.json").read_text())
    (outcome,) = report["outcomes"]
    assert outcome["status"] == "built"
    assert outcome["network_tests"] == {}  # the gate ran gold: nothing needs the network
    assert outcome["gate"].startswith("ok: gold passes 2 kept tests, empty fails 1")
    assert (built / "logs" / f"{ROW['instance_id']}.gold.log.gz").is_file()
    assert (built / "logs" / f"{ROW['instance_id']}.empty.log.gz").is_file()
    text = (built / "report.md").read_text()
    assert "1 of 1 rows can run locally" in text


def test_environment_is_pinned_to_the_row_date(built: Path) -> None:
    """Unpinned requirements resolve as of created_at (2023-10-07); the spec's pins hold."""
    report = json.loads((built / "report.json").read_text())
    (outcome,) = report["outcomes"]
    assert outcome["as_of"] == "2023-10-07T00:00:00Z"
    env = report["envs"][outcome["env_key"]]
    assert env["packages"]["pytest"] == "7.4.4"  # pinned by specs.yaml (released 2023-12-30)
    assert env["packages"]["coverage"].startswith(("7.3.",))  # pytest-cov's dep, as of Oct 2023
    assert "pytest==7.4.4" in (built / "report.md").read_text()


def test_validate_gold_resolves_empty_does_not(built: Path, tmp_path: Path) -> None:
    code = run(
        [
            "validate",
            "dataset=file",
            f"dataset.path={built / 'tasks.jsonl'}",
            "--out",
            str(tmp_path),
        ]
    )
    rows = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert code == 0, rows
    assert {r["patch"]: r["resolved"] for r in rows} == {"gold": True, "empty": False}
    for r in rows:  # each grading's test log kept, linked from the report
        log = gzip.decompress((tmp_path / r["log"]).read_bytes()).decode()
        assert "test_subclass_from_versioninfo" in log
        assert f"href='{r['log']}'" in (tmp_path / "report.html").read_text()


def test_rebuild_shares_the_environment(built: Path, semver_mirror: Path, tmp_path: Path) -> None:
    code = run(
        [
            "datasets", "build-local", "dataset=file", f"dataset.path={HERE / 'semver.jsonl'}",
            "--out", str(tmp_path), "--cache-dir", str(built / "cache"),
            "--mirror", f"{ROW['repo']}={semver_mirror}", "--specs", str(HERE / "specs.yaml"),
            "--no-probe",
        ]
    )  # fmt: skip
    assert code == 0
    (outcome,) = json.loads((tmp_path / "report.json").read_text())["outcomes"]
    assert outcome["env_shared"] is True


def test_unbuildable_rows_are_reported_not_built(tmp_path: Path) -> None:
    row = {**ROW, "instance_id": "x__y-1", "repo": "x/y", "version": "9.9"}
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(row) + "\n")
    code = run(
        ["datasets", "build-local", "dataset=file", f"dataset.path={path}",
         "--out", str(tmp_path / "o"), "--cache-dir", str(tmp_path / "c")]
    )  # fmt: skip
    assert code == 1
    (outcome,) = json.loads((tmp_path / "o" / "report.json").read_text())["outcomes"]
    assert outcome["status"] == "unbuildable"
    assert "no install spec for x/y version '9.9'" in outcome["reason"]
    assert "--specs" in outcome["reason"]
    assert (tmp_path / "o" / "tasks.jsonl").read_text() == ""


def test_raw_rows_on_local_name_build_local(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A raw SWE-bench row has no template: one line naming the command that builds it."""
    code = run(
        ["validate", "dataset=file", f"dataset.path={HERE / 'semver.jsonl'}",
         "--out", str(tmp_path)]
    )  # fmt: skip
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert code != 0
    assert "patchgym datasets build-local" in out and "Traceback" not in out
    assert not (tmp_path / "results.jsonl").exists()


def test_offline_clone_names_mirror(tmp_path: Path) -> None:
    """No git host is reachable here: the clone's failure says how to give a local copy."""
    code = run(
        ["datasets", "build-local", "dataset=file", f"dataset.path={HERE / 'semver.jsonl'}",
         "--out", str(tmp_path / "o"), "--cache-dir", str(tmp_path / "c"),
         "--specs", str(HERE / "specs.yaml"), "--no-probe"]
    )  # fmt: skip
    assert code == 1
    (outcome,) = json.loads((tmp_path / "o" / "report.json").read_text())["outcomes"]
    assert outcome["status"] == "failed"
    assert "--mirror python-semver/python-semver=PATH" in outcome["reason"]


def test_docker_images_validate_offline(built: Path, semver_mirror: Path, tmp_path: Path) -> None:
    """``--for docker``: the same template and env as an image FROM local/bookworm-py; the
    docker backend runs the row with no registry and no network (CI: PATCHGYM_REQUIRE_ENGINES)."""
    from patchgym_envs.bundled.docker import base_image_problem
    from patchgym_sandbox.testing.engines import engine_missing

    problem = base_image_problem()
    if problem is not None:
        engine_missing(problem)
    out = tmp_path / "docker"
    code = run(
        [
            "datasets", "build-local", "dataset=file", f"dataset.path={HERE / 'semver.jsonl'}",
            "--out", str(out), "--cache-dir", str(built / "cache"), "--for", "docker",
            "--mirror", f"{ROW['repo']}={semver_mirror}", "--specs", str(HERE / "specs.yaml"),
        ]
    )  # fmt: skip
    assert code == 0
    (outcome,) = json.loads((out / "report.json").read_text())["outcomes"]
    assert outcome["env_shared"] is True and outcome["image"].startswith("patchgym-swe:")
    (task,) = [json.loads(x) for x in (out / "tasks.jsonl").read_text().splitlines()]
    assert task["image"] == outcome["image"]
    env_tag = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{index .Config.Labels \"patchgym.env-image\"}}",
         task["image"]], capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert env_tag.startswith("patchgym-swe-env:")
    try:
        code = run(
            ["validate", "sandbox=docker", "dataset=file", f"dataset.path={out / 'tasks.jsonl'}",
             "--out", str(tmp_path / "v")]
        )  # fmt: skip
    finally:  # this run's images only (their tags hold this run's paths)
        subprocess.run(["docker", "rmi", task["image"], env_tag], capture_output=True, check=False)
    rows = [json.loads(x) for x in (tmp_path / "v" / "results.jsonl").read_text().splitlines()]
    assert code == 0, rows
    assert {r["patch"]: r["resolved"] for r in rows} == {"gold": True, "empty": False}


def test_parity_gate_refuses_rows_that_would_not_grade(
    built: Path, semver_mirror: Path, tmp_path: Path
) -> None:
    """A row whose empty patch passes a FAIL_TO_PASS test, and one whose gold patch fails a
    kept test with no network error of its own, are unbuildable with the reason."""
    p2p = json.loads(ROW["PASS_TO_PASS"])
    bad = [
        {**ROW, "instance_id": "semver-empty-passes", "FAIL_TO_PASS": json.dumps(p2p)},
        {**ROW, "instance_id": "semver-gold-fails",
         "PASS_TO_PASS": json.dumps([*p2p, "tests/test_subclass.py::test_not_there"])},
    ]  # fmt: skip
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in bad))
    code = run(
        ["datasets", "build-local", "dataset=file", f"dataset.path={path}",
         "--out", str(tmp_path / "o"), "--cache-dir", str(built / "cache"),
         "--mirror", f"{ROW['repo']}={semver_mirror}", "--specs", str(HERE / "specs.yaml")]
    )  # fmt: skip
    assert code == 1
    outcomes = json.loads((tmp_path / "o" / "report.json").read_text())["outcomes"]
    reasons = {o["id"]: (o["status"], o["reason"]) for o in outcomes}
    assert reasons["semver-empty-passes"] == (
        "unbuildable",
        "parity gate: empty patch passes 1 FAIL_TO_PASS tests: "
        "tests/test_subclass.py::test_subclass_from_versioninfo",
    )
    status, reason = reasons["semver-gold-fails"]
    assert status == "unbuildable" and reason.startswith("parity gate: gold fails 1 kept tests")
    assert (tmp_path / "o" / "tasks.jsonl").read_text() == ""
    assert (tmp_path / "o" / "logs" / "semver-gold-fails.gold.log.gz").is_file()
