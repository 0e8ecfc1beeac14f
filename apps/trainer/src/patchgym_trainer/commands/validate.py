"""``patchgym validate``: the gold patch must resolve every task, the empty patch must not.

Runs each task of a dataset once per patch kind on the configured backend (a fresh
sandbox each, through :func:`patchgym_envs.evaluate_patch`), shows a progress bar,
prints a per-task table and writes ``results.jsonl``, ``chart.svg``, ``report.html`` and
each grading's test log (``logs/<task>.<patch>.log.gz``, linked from the report).
Images pulled as-is are reduced to their base commit first, each once
(:func:`patchgym_agents.rollout.prepare_images`, its own progress bar).
A task *misbehaves* when the gold patch does not resolve it or the empty patch does;
an infrastructure failure is reported apart (``infra``), never as the task's fault.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from patchgym_agents.rollout import prepare_images
from patchgym_envs import EnvConfig, Task, evaluate_patch
from patchgym_envs.localbuild.hints import missing_image_hint, not_runnable
from patchgym_sandbox import SandboxBackend, create_backend
from patchgym_sandbox import labels as L
from patchgym_trainer import report
from patchgym_trainer.datasets import load_dataset
from patchgym_trainer.errors import TrainerError
from patchgym_trainer.outputs import kept_on_full_disk
from patchgym_trainer.schema import AppConfig

PatchKind = Literal["gold", "empty"]
Outcome = Literal["ok", "misbehaves", "infra"]


class PatchResult(BaseModel):
    """One (task, patch) evaluation: a JSONL line of ``results.jsonl``."""

    task_id: str
    patch: PatchKind
    expected_resolved: bool
    resolved: bool
    outcome: Outcome
    status: str
    reward: float
    duration_s: float
    infra_error: str | None = None
    rejected: str | None = None
    f2p: str = ""
    p2p: str = ""
    expected: str = ""
    """R2E-Gym tasks: tests matching the reference run's recorded outcome (no F2P/P2P lists)."""
    executed_on: str | None = None
    """The Ray node that ran it (``run.executor=ray``)."""
    log: str | None = None
    """The test log, gzip, relative to the output folder (None: the tests never ran)."""


class TaskResult(BaseModel):
    task_id: str
    outcome: Outcome
    gold: str
    empty: str
    duration_s: float
    note: str = ""
    logs: str = ""


class ValidateSummary(BaseModel):
    tasks: int
    ok: int
    misbehaving: list[str]
    infra: list[str]
    output_dir: str
    wall_s: float

    @property
    def passed(self) -> bool:
        return not self.misbehaving and not self.infra


def log_name(task_id: str, kind: PatchKind) -> str:
    return f"logs/{task_id}.{kind}.log.gz"


async def evaluate_one(
    task: Task,
    kind: PatchKind,
    backend: SandboxBackend,
    *,
    run_id: str,
    env: EnvConfig,
    out_dir: Path | None = None,
) -> PatchResult:
    patch = task.gold_patch if kind == "gold" else ""
    expected = kind == "gold"
    t0 = time.monotonic()
    log_path = out_dir / log_name(task.id, kind) if out_dir is not None else None
    verdict = await evaluate_patch(task, patch, backend, run_id=run_id, env=env, log_path=log_path)
    elapsed = time.monotonic() - t0
    if verdict.infra_error is not None:
        outcome: Outcome = "infra"
    else:
        outcome = "ok" if verdict.resolved == expected else "misbehaves"
    f2p = f"{verdict.f2p_passed}/{verdict.f2p_total}" if verdict.f2p_total else ""
    p2p = f"{verdict.p2p_passed}/{verdict.p2p_total}" if verdict.p2p_total else ""
    matched = [t.ok for t in verdict.tests if t.role == "EXPECTED"]
    expected_tests = f"{sum(matched)}/{len(matched)}" if matched else ""
    return PatchResult(
        task_id=task.id,
        patch=kind,
        expected_resolved=expected,
        resolved=verdict.resolved,
        outcome=outcome,
        status=str(verdict.status.value if hasattr(verdict.status, "value") else verdict.status),
        reward=verdict.reward,
        duration_s=round(elapsed, 3),
        infra_error=verdict.infra_error,
        rejected=verdict.rejected,
        f2p=f2p,
        p2p=p2p,
        expected=expected_tests,
        log=log_name(task.id, kind) if log_path is not None and log_path.is_file() else None,
    )


def per_task(results: Sequence[PatchResult]) -> list[TaskResult]:
    by_task: dict[str, list[PatchResult]] = {}
    for r in results:
        by_task.setdefault(r.task_id, []).append(r)
    rows = []
    for task_id, rs in by_task.items():
        outcomes = {r.outcome for r in rs}
        outcome: Outcome = (
            "infra" if "infra" in outcomes else "misbehaves" if "misbehaves" in outcomes else "ok"
        )
        cells = {r.patch: _cell(r) for r in rs}
        notes = [
            f"{r.patch}: {r.infra_error or r.rejected or ('resolved' if r.resolved else 'not resolved')}"
            for r in rs
            if r.outcome != "ok"
        ]
        rows.append(
            TaskResult(
                task_id=task_id,
                outcome=outcome,
                gold=cells.get("gold", "-"),
                empty=cells.get("empty", "-"),
                duration_s=round(sum(r.duration_s for r in rs), 3),
                note="; ".join(notes)[:300],
                logs=" ".join(r.log for r in rs if r.log),
            )
        )
    return rows


def _cell(r: PatchResult) -> str:
    word = "resolved" if r.resolved else "not resolved"
    if r.outcome == "infra":
        word = "infra error"
    tests = " ".join(
        x
        for x in (
            f"F2P {r.f2p}" if r.f2p else "",
            f"P2P {r.p2p}" if r.p2p else "",
            f"expected {r.expected}" if r.expected else "",
        )
        if x
    )
    return f"{word} ({r.duration_s:.1f}s{', ' + tests if tests else ''})"


async def run_validate(
    cfg: AppConfig, out_dir: Path, console: Console, *, run_id: str
) -> ValidateSummary:
    """Validate ``cfg.dataset``; ``run_id`` labels every sandbox (and is the default
    output folder's name, so ``sandboxes reap --run`` and the folder agree)."""
    t0 = time.monotonic()
    tasks = load_dataset(cfg.dataset).tasks
    kinds: list[PatchKind] = list(cfg.validate_.patches)
    backend = create_backend(cfg.sandbox)
    unrunnable = not_runnable(tasks, backend)
    if unrunnable is not None:
        await backend.aclose()
        raise TrainerError(unrunnable)
    sem = asyncio.Semaphore(cfg.validate_.concurrency)
    remote = None
    if cfg.run.executor == "ray":
        from patchgym_trainer.executors.ray import validate_executor

        remote = validate_executor(cfg)
    results: list[PatchResult] = []
    backend_name = cfg.sandbox.type
    console.print(
        f"validating {len(tasks)} tasks × {'+'.join(kinds)} patch on [bold]{backend_name}[/] "
        f"(dataset {cfg.dataset.name}, concurrency {cfg.validate_.concurrency})",
        soft_wrap=True,
    )
    console.print(f"run {run_id} → {out_dir}", soft_wrap=True, highlight=False)
    progress = Progress(
        TextColumn("[bold]validate"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
    try:
        await backend.list_sandboxes()  # an unreachable engine fails here, once (exit 4)
        if remote is None:  # Ray workers prepare on their own engines
            await prepare_images(backend, cfg.env, tasks, console=console)
        with progress:
            bar = progress.add_task("validate", total=len(tasks) * len(kinds), status="")

            async def one(task: Task, kind: PatchKind) -> None:
                async with sem:
                    if remote is not None:
                        res = PatchResult.model_validate(await remote(task, kind, run_id))
                    else:
                        res = await evaluate_one(
                            task, kind, backend, run_id=run_id, env=cfg.env, out_dir=out_dir
                        )
                results.append(res)
                bad = sum(r.outcome != "ok" for r in results)
                progress.update(
                    bar, advance=1, status=f"{task.id} {kind}: {res.outcome}; problems {bad}"
                )

            await asyncio.gather(*(one(t, k) for t in tasks for k in kinds))
    finally:  # interrupted or not: nothing of this run may outlive it
        try:
            await backend.reap({L.RUN_ID: run_id}, expired=False)
        finally:
            await backend.aclose()
    order = {t.id: i for i, t in enumerate(tasks)}
    results.sort(key=lambda r: (order[r.task_id], kinds.index(r.patch)))
    rows = per_task(results)
    print_table(rows, console)
    for r in results:  # the reason, not only "infra error", on the terminal
        if r.infra_error:
            why = missing_image_hint(r.infra_error, backend_name)
            console.print(f"[yellow]{r.task_id} {r.patch}: infra error: {why}[/]", markup=True)
    summary = ValidateSummary(
        tasks=len(rows),
        ok=sum(r.outcome == "ok" for r in rows),
        misbehaving=[r.task_id for r in rows if r.outcome == "misbehaves"],
        infra=[r.task_id for r in rows if r.outcome == "infra"],
        output_dir=str(out_dir),
        wall_s=round(time.monotonic() - t0, 2),
    )
    if cfg.validate_.report:
        with kept_on_full_disk(out_dir):
            write_report(cfg, results, rows, summary, out_dir)
        console.print(
            f"report: {out_dir / 'report.html'}  (results.jsonl, chart.svg beside it)",
            soft_wrap=True,
            highlight=False,
        )
    return summary


def print_table(rows: Sequence[TaskResult], console: Console) -> None:
    table = Table(title="validate: gold patch must resolve, empty patch must not")
    table.add_column("task", overflow="fold")
    for col in ("outcome", "gold patch", "empty patch", "time"):
        table.add_column(col, overflow="fold")
    style = {"ok": "green", "misbehaves": "bold red", "infra": "yellow"}
    for r in rows:
        table.add_row(
            r.task_id,
            f"[{style[r.outcome]}]{r.outcome}[/]",
            r.gold,
            r.empty,
            f"{r.duration_s:.1f}s",
        )
    console.print(table)


def write_report(
    cfg: AppConfig,
    results: Sequence[PatchResult],
    rows: Sequence[TaskResult],
    summary: ValidateSummary,
    out_dir: Path,
) -> None:
    report.write_jsonl(results, out_dir / "results.jsonl")
    chart = report.outcome_svg(  # counts what the table counts: tasks, not (task, patch) runs
        [r.task_id for r in rows],
        [r.outcome for r in rows],
        [r.duration_s for r in rows],
        title=f"patchgym validate — {cfg.dataset.name} on {cfg.sandbox.type}",
        unit="tasks",
    )
    report.write_svg(chart, out_dir / "chart.svg")
    notes = []
    if any(r.expected for r in results):
        notes.append(
            "expected n/m: R2E-Gym tasks are graded against the outcomes their reference run "
            "recorded (expected_output_json), so they have no FAIL_TO_PASS/PASS_TO_PASS lists."
        )
    report.write_html(
        out_dir / "report.html",
        title=f"patchgym validate — {cfg.dataset.name} on {cfg.sandbox.type}",
        summary={
            "tasks": summary.tasks,
            "ok": summary.ok,
            "misbehaving": ", ".join(summary.misbehaving) or "none",
            "infra errors": ", ".join(summary.infra) or "none",
            "wall time (s)": summary.wall_s,
            "dataset": cfg.dataset.name,
            "sandbox": cfg.sandbox.type,
        },
        columns=["task_id", "outcome", "gold", "empty", "duration_s", "note", "logs"],
        rows=[r.model_dump() for r in rows],
        charts=[chart],
        notes=notes,
        links=["logs"],
    )
