"""The rollout report shows the hack flags graders recorded, per flag and per task."""

from __future__ import annotations

from patchgym_agents.episode import EpisodeResult
from patchgym_agents.rollout.summary import summarise


def graded(task: str, *flags: str) -> EpisodeResult:
    return EpisodeResult(
        task_id=task, status="graded", resolved=False, verdict={"flags": list(flags)}
    )


def test_flag_rates_over_graded_episodes() -> None:
    results = [
        graded("a", "canary_flipped", "steering_file"),
        graded("a", "steering_file"),
        graded("b"),
        graded("b", "git_tampered"),
        EpisodeResult(task_id="c", status="infra_error", verdict={"flags": ["truncated"]}),
    ]
    s = summarise(
        results,
        run_id="r",
        policy="p",
        scaffold="s",
        tasks=3,
        samples=2,
        wall_s=1.0,
        leaked=[],
        output_dir="",
    )
    assert s.hack_flags == {"canary_flipped": 0.25, "git_tampered": 0.25, "steering_file": 0.5}
    assert s.hack_flags_by_task == {
        "a": {"canary_flipped": 1, "steering_file": 2},
        "b": {"git_tampered": 1},
    }
