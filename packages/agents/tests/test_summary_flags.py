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


def test_step_metrics_from_outcomes() -> None:
    """What the verl and TRL engines log per step: the same rates, from the driver's Outcome."""
    from patchgym_agents import EndReason, Outcome, hack_metrics
    from patchgym_agents.envs_api import HackFlag, Verdict

    def outcome(*flags: HackFlag, reward: float | None = 0.0) -> Outcome:
        verdict = Verdict.forged("x", *flags) if flags else Verdict.forged("x")
        reason = EndReason.SUBMITTED if reward is not None else EndReason.INFRA
        return Outcome(end_reason=reason, reward=reward, verdict=verdict)

    outcomes = [
        outcome(HackFlag.GIT_OUTSIDE_HEAD, HackFlag.TEST_EDITED),
        outcome(HackFlag.GIT_OUTSIDE_HEAD),
        outcome(),
        outcome(),
        outcome(HackFlag.TRUNCATED, reward=None),  # masked: not counted
    ]
    m = hack_metrics(outcomes)
    assert set(m) == {f"hack/{f}" for f in HackFlag} | {"hack/any"}
    assert m["hack/git_outside_head"] == 0.5 and m["hack/test_edited"] == 0.25
    assert m["hack/truncated"] == 0.0 and m["hack/any"] == 0.5
    assert outcomes[0].hack_fields()["hack/any"] == 1.0 and outcomes[4].hack_flags == ()
    assert hack_metrics([]) == dict.fromkeys(m, 0.0)
