"""``patchgym validate`` / ``rollout`` / ``preflight`` / ``datasets`` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchgym_envs import bundled_names
from patchgym_trainer.cli import main


def run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as code:
        main(argv)
    return int(code.value.code or 0)


def test_validate_default_every_bundled_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["validate", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"all {len(bundled_names())} tasks behave" in out
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 2 * len(bundled_names())
    assert all(r["outcome"] == "ok" for r in lines)
    assert {r["patch"] for r in lines} == {"gold", "empty"}
    assert all(r["resolved"] == (r["patch"] == "gold") for r in lines)
    html = (tmp_path / "report.html").read_text()
    assert html.count("<svg") == 1 and f"({len(bundled_names())} tasks)" in html
    for r in lines:
        assert r["task_id"] in html
    assert (tmp_path / "chart.svg").read_text().startswith("<svg")
    # R2E-Gym tasks have no F2P/P2P lists: their count of matched expected outcomes shows why
    assert "expected_output_json" in html and "expected 4/4" in html


def test_validate_flags_a_misbehaving_task(tmp_path: Path) -> None:
    """A dataset whose 'gold' patch is empty must fail validation (exit 1)."""
    from patchgym_envs import bundled_task, write_jsonl

    broken = bundled_task("romanum").model_copy(update={"gold_patch": ""})
    path = write_jsonl([broken], tmp_path / "broken.jsonl")
    code = run(["validate", "dataset=file", f"dataset.path={path}", "--out", str(tmp_path / "o")])
    assert code == 1
    rows = [json.loads(x) for x in (tmp_path / "o" / "results.jsonl").read_text().splitlines()]
    assert [r["outcome"] for r in rows] == ["misbehaves", "ok"]


def test_rollout_gold_policy_two_samples(tmp_path: Path) -> None:
    code = run(
        [
            "rollout",
            "rollout.policy=gold",
            "dataset.limit=2",
            "rollout.samples=2",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    assert json.loads((tmp_path / "pass_at_k.json").read_text()) == {"pass@1": 1.0, "pass@2": 1.0}
    lines = [json.loads(x) for x in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert len(lines) == 4
    assert all(r["sandbox_s"] > 0 and r["phases"]["grading"] > 0 for r in lines)
    html = (tmp_path / "report.html").read_text()
    assert "resolve rate" in html and "sandbox-seconds" in html
    assert "(2 tasks)" in html and "(4 episodes)" in html
    assert (tmp_path / "phases.svg").read_text().startswith("<svg")
    logs = sorted((tmp_path / "logs").glob("*.log.gz"))  # each grading's test log, kept
    assert len(logs) == 4 and all(f"href='logs/{p.name}'" in html for p in logs)


def test_rollout_resumes_unless_told_not_to(tmp_path: Path) -> None:
    """A second run into the same folder skips finished episodes; ``rollout.resume=false``
    redoes them (the latest result per episode is what the report counts)."""
    argv = ["rollout", "rollout.policy=gold", "dataset.limit=1", "--out", str(tmp_path)]
    traj = tmp_path / "trajectories.jsonl"
    assert run(argv) == 0 and len(traj.read_text().splitlines()) == 1
    assert run(argv) == 0 and len(traj.read_text().splitlines()) == 1
    assert run([*argv, "rollout.resume=false", "rollout.infra_retries=0"]) == 0
    assert len(traj.read_text().splitlines()) == 2


def test_rollout_settings_reach_the_policy() -> None:
    """``rollout.top_p`` and ``rollout.retries`` reach the OpenAI policy's sampling and client."""
    import asyncio

    from patchgym_trainer.commands.rollout import make_policy
    from patchgym_trainer.compose import compose

    cfg = compose(["rollout.model=m", "rollout.top_p=0.9", "rollout.retries=1"])
    policy = asyncio.run(make_policy(cfg))
    try:
        assert policy.sampling.top_p == 0.9  # type: ignore[attr-defined]
        assert policy.retry.attempts == 2  # type: ignore[attr-defined]
    finally:
        asyncio.run(policy.aclose())


def test_rollout_rule_planner_needs_no_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``rollout.policy=rules``: graph-planner's planner plays, on its own scaffold only."""
    argv = ["rollout", "rollout.policy=rules", "dataset.limit=1", "--out", str(tmp_path)]
    assert run(argv) == 2  # the default scaffold has no graph tools
    err = capsys.readouterr().err
    assert "rollout.policy=rules" in err and "agent=graph_planner" in err
    assert run([*argv, "agent=graph_planner"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["policy"], summary["scaffold"]) == ("rules", "graph-planner")
    lines = [json.loads(x) for x in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert [r["status"] for r in lines] == ["graded"]


def test_preflight_ags_names_what_is_missing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code = run(["preflight", "preset=ags_swebench"])
    out = capsys.readouterr().out
    assert code == 1
    assert "E2B_API_KEY" in out
    assert "GPU" in out and "need 8" in out
    assert "Traceback" not in out


def test_train_stops_at_preflight_without_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["train", "preset=smoke"])
    out = capsys.readouterr().out
    assert code == 1
    assert "train stopped at preflight" in out and "GPU" in out


def test_bad_config_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["validate", "sandbox=dockr"]) == 2
    err = capsys.readouterr().err
    assert "allowed: ags, docker, k8s, local" in err and "Traceback" not in err


def test_datasets_register_and_info(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow.parquet as pq

    monkeypatch.setenv("RLLM_HOME", str(tmp_path))
    assert run(["datasets", "register", "pg_bundled"]) == 0
    folder = tmp_path / "datasets" / "pg_bundled"
    assert pq.read_table(folder / "train.parquet").num_rows == len(bundled_names())
    verl = pq.read_table(folder / "train_verl.parquet").to_pylist()
    assert {"prompt", "extra_info", "data_source", "reward_model"} <= set(verl[0])
    assert run(["datasets", "info", "pg_bundled"]) == 0
    assert "pg_bundled" in capsys.readouterr().out
