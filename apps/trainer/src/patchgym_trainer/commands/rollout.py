"""``patchgym rollout``: a policy over a dataset, K samples per task, on any backend.

The episode loop, concurrency, retries, resumable JSONL and the summary are the agents
package's runner (:func:`patchgym_agents.rollout`). This module picks the policy from
the config, adds pass@k for every k up to K (unbiased estimator), and writes the report
(``report.html`` with a per-task table, ``chart.svg``, ``phases.svg``) next to
``trajectories.jsonl``.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Sequence
from math import comb
from pathlib import Path

from pydantic import BaseModel
from rich.console import Console

from patchgym_agents import (
    EpisodeResult,
    GoldPatchPolicy,
    OpenAIPolicy,
    Policy,
    RolloutConfig,
    RolloutSummary,
    RulePlannerPolicy,
    Sampling,
    rollout,
)
from patchgym_agents.rollout import ResultStore, print_summary
from patchgym_envs.localbuild.hints import not_runnable
from patchgym_sandbox import create_backend
from patchgym_trainer import report, tracing
from patchgym_trainer.datasets import load_dataset
from patchgym_trainer.errors import ConfigError, TrainerError
from patchgym_trainer.outputs import kept_on_full_disk, write_text
from patchgym_trainer.schema import AppConfig


class TaskRow(BaseModel):
    task_id: str
    outcome: str
    samples: int
    resolved: int
    infra: int
    format_errors: int
    steps: float
    tokens: int
    duration_s: float
    logs: str = ""
    """Grading test logs (gzip) of the task's episodes, relative to the output folder."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n graded samples of which c resolved (Chen et al., 2021)."""
    if n < k:
        return float(c > 0)
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_at_ks(results: Sequence[EpisodeResult], samples: int) -> dict[int, float]:
    per_task: dict[str, list[bool]] = {}
    for r in results:
        if r.status == "graded":
            per_task.setdefault(r.task_id, []).append(bool(r.resolved))
    out: dict[int, float] = {}
    for k in range(1, samples + 1):
        vals = [pass_at_k(len(v), sum(v), k) for v in per_task.values()]
        out[k] = sum(vals) / len(vals) if vals else 0.0
    return out


async def make_policy(cfg: AppConfig) -> Policy:
    """The run's policy (``rollout.policy``): the one place a rollout's policy is built."""
    r = cfg.rollout
    if r.policy == "gold":
        return GoldPatchPolicy()
    if r.policy == "empty":
        return GoldPatchPolicy(empty=True)
    if r.policy == "rules":
        if cfg.env.scaffold != "graph-planner":
            raise ConfigError(
                f"rollout.policy=rules is graph-planner's rule-based planner, but env.scaffold "
                f"is {cfg.env.scaffold!r}: add agent=graph_planner"
            )
        return RulePlannerPolicy()
    api_key = os.environ.get(r.api_key_env) or "EMPTY"
    model = r.model or await served_model(r.base_url, api_key)
    return OpenAIPolicy(
        model,
        base_url=r.base_url,
        api_key=api_key,
        sampling=Sampling(temperature=r.temperature, top_p=r.top_p, max_tokens=r.max_tokens),
        model_timeout_s=r.model_timeout_s,
        max_retries=r.retries,
    )


async def served_model(base_url: str, api_key: str) -> str:
    """The first model the endpoint lists (``GET /models``)."""
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=30, max_retries=2)
    try:
        page = await client.models.list()
    except openai.APIConnectionError as exc:
        raise TrainerError(
            f"no OpenAI-compatible server at {base_url} ({exc}); start one or set rollout.base_url=..."
        ) from None
    finally:
        await client.close()
    if not page.data:
        raise TrainerError(f"{base_url}/models lists no model; set rollout.model=<name>")
    return page.data[0].id


async def run_rollout(
    cfg: AppConfig, out_dir: Path, console: Console, *, run_id: str | None = None
) -> RolloutSummary:
    """Roll out ``cfg.rollout``'s policy; ``run_id`` (else ``env.run_id``, else one derived
    from ``out_dir`` so a resumed run keeps it) labels every sandbox."""
    tasks = load_dataset(cfg.dataset).tasks
    backend = create_backend(cfg.sandbox)
    try:
        unrunnable = not_runnable(tasks, backend)
    finally:
        await backend.aclose()
    if unrunnable is not None:
        raise TrainerError(unrunnable)
    policy = await make_policy(cfg)
    env = (
        cfg.env
        if run_id is None or cfg.env.run_id
        else cfg.env.model_copy(update={"run_id": run_id})
    )
    if env.grading_logs is None:  # keep each grading's test log beside trajectories.jsonl
        env = env.model_copy(update={"grading_logs": str(out_dir / "logs")})
    rc = RolloutConfig(
        env=env,
        tool_format=cfg.rollout.tool_format or cfg.agent.tool_format,
        samples=cfg.rollout.samples,
        concurrency=cfg.rollout.concurrency,
        model_timeout_s=cfg.rollout.model_timeout_s,
        infra_retries=cfg.rollout.infra_retries,
        max_context_tokens=cfg.agent.max_context_tokens,
        output_dir=out_dir,
        resume=cfg.rollout.resume,
    )
    console.print(
        f"rollout: {len(tasks)} tasks × {rc.samples} samples, policy {cfg.rollout.policy}, "
        f"scaffold {cfg.env.scaffold}, sandbox {cfg.sandbox.type}",
        soft_wrap=True,
    )
    from patchgym_agents.rollout import default_run_id

    console.print(
        f"run {rc.env.run_id or default_run_id(rc)} → {out_dir}", soft_wrap=True, highlight=False
    )
    executor = None
    if cfg.run.executor == "ray":
        from patchgym_trainer.executors.ray import episode_executor

        executor = episode_executor(cfg, rc, rc.env.run_id or default_run_id(rc))
    provider = tracing.start(cfg.run)
    try:
        with kept_on_full_disk(out_dir):  # trajectories.jsonl is appended as episodes end
            summary = await rollout(tasks, policy, rc, executor=executor)
    finally:
        await policy.aclose()
        if provider is not None:
            provider.shutdown()
    results = list(ResultStore(out_dir).load().values())  # the latest result per episode
    pk = pass_at_ks(results, rc.samples)
    print_summary(summary, console)
    console.print("pass@k: " + ", ".join(f"pass@{k} {v:.1%}" for k, v in pk.items()))
    with kept_on_full_disk(out_dir):
        write_report(cfg, summary, results, pk, out_dir)
    console.print(
        f"report: {out_dir / 'report.html'} (trajectories.jsonl beside it)",
        soft_wrap=True,
        highlight=False,
    )
    return summary


def task_logs(out_dir: Path | None, task_id: str) -> str:
    """The task's kept grading logs, as paths relative to ``out_dir``."""
    if out_dir is None:
        return ""
    found = sorted((out_dir / "logs").glob(f"{glob.escape(task_id)}.*.log.gz"))
    return " ".join(f"logs/{p.name}" for p in found)


def task_rows(results: Sequence[EpisodeResult], out_dir: Path | None = None) -> list[TaskRow]:
    by_task: dict[str, list[EpisodeResult]] = {}
    for r in results:
        by_task.setdefault(r.task_id, []).append(r)
    rows = []
    for task_id, rs in by_task.items():
        resolved = sum(bool(r.resolved) for r in rs)
        infra = sum(r.status == "infra_error" for r in rs)
        outcome = "resolved" if resolved else "infra" if infra == len(rs) else "unresolved"
        rows.append(
            TaskRow(
                task_id=task_id,
                outcome=outcome,
                samples=len(rs),
                resolved=resolved,
                infra=infra,
                format_errors=sum(r.format_errors for r in rs),
                steps=sum(r.steps for r in rs) / len(rs),
                tokens=sum(r.usage.prompt_tokens + r.usage.completion_tokens for r in rs),
                duration_s=round(sum(r.timings.total_s for r in rs), 2),
                logs=task_logs(out_dir, task_id),
            )
        )
    return rows


def write_report(
    cfg: AppConfig,
    summary: RolloutSummary,
    results: Sequence[EpisodeResult],
    pk: dict[int, float],
    out_dir: Path,
) -> None:
    rows = task_rows(results, out_dir)
    chart = report.outcome_svg(  # counts what the table counts: tasks (samples summed)
        [r.task_id for r in rows],
        [r.outcome for r in rows],
        [r.duration_s for r in rows],
        title=f"patchgym rollout — {cfg.dataset.name}, {summary.policy}",
        unit="tasks",
    )
    phases = report.phase_svg(
        [f"{r.task_id} [s{r.sample}]" for r in results],
        [r.phases for r in results],
        title="where the time went (create/claim, setup, generation, tool calls, grading, close)",
    )
    write_text(out_dir / "pass_at_k.json", json.dumps({f"pass@{k}": v for k, v in pk.items()}))
    report.write_svg(chart, out_dir / "chart.svg")
    report.write_svg(phases, out_dir / "phases.svg")
    sandbox_s = sum(r.sandbox_s for r in results)
    s = summary
    report.write_html(
        out_dir / "report.html",
        title=f"patchgym rollout — {cfg.dataset.name}, {s.policy} / {s.scaffold}",
        summary={
            "episodes (finished / expected)": f"{s.finished} / {s.episodes}",
            "resolve rate": f"{s.resolve_rate:.1%} ({s.resolved}/{s.graded} graded)",
            **{f"pass@{k}": f"{v:.1%}" for k, v in pk.items()},
            "format errors": f"{s.format_errors} / {s.model_steps} model steps ({s.format_error_rate:.1%})",
            "infra errors": f"{s.infra_failed} (retries {s.infra_retries})",
            "tokens (prompt / completion)": f"{s.prompt_tokens} / {s.completion_tokens}",
            "time per phase, mean s (model / sandbox / tools / grading / total)": " / ".join(
                f"{getattr(s.mean_phases, k):.2f}"
                for k in ("model_s", "sandbox_s", "tools_s", "grading_s", "total_s")
            ),
            "wall (s)": s.wall_s,
            "sandbox-seconds (total / mean per episode)": (
                f"{sandbox_s:.1f} / {sandbox_s / max(1, len(results)):.2f}"
            ),
            "leaked sandboxes": len(s.leaked_sandboxes),
        },
        columns=list(TaskRow.model_fields),
        rows=[r.model_dump() for r in rows],
        charts=[chart, phases],
        links=["logs"],
    )
