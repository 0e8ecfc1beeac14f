"""The run's numbers: resolve rate, pass@k, format errors, steps, tokens, time per phase."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from pydantic import BaseModel, Field
from rich.console import Console
from rich.table import Table

from patchgym_agents.episode import EpisodeResult, Timings


class PhaseTimes(Timings):
    """An episode's :class:`Timings` summed over episodes (``mean_*``: per episode)."""


class RolloutSummary(BaseModel):
    run_id: str
    policy: str
    scaffold: str
    tasks: int
    samples: int
    episodes: int
    """Expected: tasks × samples."""
    finished: int
    graded: int
    resolved: int
    resolve_rate: float
    """resolved / graded (infra-failed episodes are not in the denominator)."""
    pass_at_k: float
    """Tasks with at least one resolved sample / tasks with a graded sample."""
    infra_failed: int
    errors: int
    infra_retries: int
    """Attempts that failed on infrastructure and were run again."""
    model_steps: int
    format_errors: int
    format_error_rate: float
    fallback_steps: int = 0
    """Model steps the graph-planner's rule-based planner took (the reply did not parse)."""
    fallback_rate: float = 0.0
    """fallback_steps / model_steps."""
    mean_steps: float
    max_steps: int
    prompt_tokens: int
    completion_tokens: int
    phases: PhaseTimes
    mean_phases: PhaseTimes
    wall_s: float
    hack_flags: dict[str, float] = Field(default_factory=dict)
    """Flag -> share of graded episodes whose verdict carries it (``Verdict.flags``:
    hidden tests edited, shadowing modules, git tampered, canary flipped, truncation)."""
    hack_flags_by_task: dict[str, dict[str, int]] = Field(default_factory=dict)
    """Task -> flag -> number of its graded episodes that carry it."""
    leaked_sandboxes: list[str] = Field(default_factory=list)
    """Sandboxes of this run still present at the end (reaped then); should be empty."""
    output_dir: str = ""


def summarise(
    results: Iterable[EpisodeResult],
    *,
    run_id: str,
    policy: str,
    scaffold: str,
    tasks: int,
    samples: int,
    wall_s: float,
    leaked: list[str],
    output_dir: str,
) -> RolloutSummary:
    rs = list(results)
    graded = [r for r in rs if r.status == "graded"]
    resolved = [r for r in graded if r.resolved]
    by_task: dict[str, bool] = defaultdict(bool)
    for r in graded:
        by_task[r.task_id] |= bool(r.resolved)
    flag_counts: dict[str, int] = defaultdict(int)
    by_task_flags: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in graded:
        for flag in (r.verdict or {}).get("flags") or []:
            flag_counts[str(flag)] += 1
            by_task_flags[r.task_id][str(flag)] += 1
    model_steps = sum(r.model_steps for r in rs)
    fmt = sum(r.format_errors for r in rs)
    fallback = sum(int(r.trajectory.get("info", {}).get("fallback_steps", 0)) for r in rs)
    phases = PhaseTimes()
    for r in rs:
        for k in PhaseTimes.model_fields:
            setattr(phases, k, getattr(phases, k) + getattr(r.timings, k))
    n = max(len(rs), 1)
    mean = PhaseTimes(**{k: round(getattr(phases, k) / n, 3) for k in PhaseTimes.model_fields})
    phases = PhaseTimes(**{k: round(getattr(phases, k), 3) for k in PhaseTimes.model_fields})
    return RolloutSummary(
        run_id=run_id,
        policy=policy,
        scaffold=scaffold,
        tasks=tasks,
        samples=samples,
        episodes=tasks * samples,
        finished=len(rs),
        graded=len(graded),
        resolved=len(resolved),
        resolve_rate=len(resolved) / len(graded) if graded else 0.0,
        pass_at_k=sum(by_task.values()) / len(by_task) if by_task else 0.0,
        infra_failed=sum(r.status == "infra_error" for r in rs),
        errors=sum(r.status == "error" for r in rs),
        infra_retries=sum(len(r.infra_attempts) for r in rs),
        model_steps=model_steps,
        format_errors=fmt,
        format_error_rate=fmt / model_steps if model_steps else 0.0,
        fallback_steps=fallback,
        fallback_rate=fallback / model_steps if model_steps else 0.0,
        mean_steps=sum(r.steps for r in rs) / n,
        max_steps=max((r.steps for r in rs), default=0),
        prompt_tokens=sum(r.usage.prompt_tokens for r in rs),
        completion_tokens=sum(r.usage.completion_tokens for r in rs),
        phases=phases,
        mean_phases=mean,
        wall_s=round(wall_s, 3),
        hack_flags={f: n / len(graded) for f, n in sorted(flag_counts.items())},
        hack_flags_by_task={t: dict(sorted(c.items())) for t, c in sorted(by_task_flags.items())},
        leaked_sandboxes=leaked,
        output_dir=output_dir,
    )


def print_summary(summary: RolloutSummary, console: Console | None = None) -> None:
    s = summary
    table = Table(title=f"rollout {s.run_id} — {s.policy} / {s.scaffold}", show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right")
    rows = [
        ("episodes (finished / expected)", f"{s.finished} / {s.episodes}"),
        ("resolved / graded", f"{s.resolved} / {s.graded}"),
        ("resolve rate", f"{s.resolve_rate:.1%}"),
        (f"pass@{s.samples}", f"{s.pass_at_k:.1%}"),
        ("infra-failed (retries)", f"{s.infra_failed} ({s.infra_retries})"),
        ("policy errors", str(s.errors)),
        ("format errors / model steps", f"{s.format_errors} / {s.model_steps}"),
        ("format-error rate", f"{s.format_error_rate:.1%}"),
        *(
            [("fallback steps (rate)", f"{s.fallback_steps} ({s.fallback_rate:.1%})")]
            if s.scaffold == "graph-planner"
            else []
        ),
        ("steps (mean / max)", f"{s.mean_steps:.1f} / {s.max_steps}"),
        ("tokens (prompt / completion)", f"{s.prompt_tokens} / {s.completion_tokens}"),
        (
            "mean s: model / sandbox / tools / grading",
            f"{s.mean_phases.model_s:.2f} / {s.mean_phases.sandbox_s:.2f} / {s.mean_phases.tools_s:.2f} / {s.mean_phases.grading_s:.2f}",
        ),
        ("wall time", f"{s.wall_s:.1f} s"),
        ("leaked sandboxes", str(len(s.leaked_sandboxes))),
        *((f"hack flag: {flag} (rate)", f"{rate:.1%}") for flag, rate in s.hack_flags.items()),
    ]
    for k, v in rows:
        table.add_row(k, v)
    (console or Console()).print(table)
