"""``patchgym datasets build-local``: the configured dataset as tasks the local backend runs
without Docker (repository at base commit + a uv environment per install spec).

Writes ``<out>/tasks.jsonl`` (only the rows that built), ``<out>/report.json`` and a
per-row table ``<out>/report.md``; prints how many rows can run locally.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from patchgym_envs import write_jsonl
from patchgym_envs.localbuild import BuildReport, LocalBuildConfig, LocalBuilder, Outcome
from patchgym_trainer.datasets import load_dataset
from patchgym_trainer.errors import TrainerError
from patchgym_trainer.schema import AppConfig


def parse_mirrors(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        repo, sep, source = item.partition("=")
        if not sep or "/" not in repo or not source:
            raise TrainerError(f"--mirror {item!r}: expected owner/name=URL-or-path")
        out[repo] = source
    return out


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f}"


def write_report(report: BuildReport, out: Path) -> None:
    (out / "report.json").write_text(
        json.dumps([o.model_dump(mode="json") for o in report.outcomes], indent=1)
    )
    lines = [
        f"# build-local: {report.summary()}",
        "",
        "| task | repo | status | env | shared | template MiB | env MiB | build s | reason |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for o in report.outcomes:
        lines.append(
            f"| {o.id} | {o.repo} | {o.status} | {o.env_key or ''} | {'yes' if o.env_shared else ''} "
            f"| {_mib(o.template_bytes)} | {_mib(o.env_bytes)} | {o.build_s} | {o.reason} |"
        )
    (out / "report.md").write_text("\n".join(lines) + "\n")


def build_local(cfg: AppConfig, build: LocalBuildConfig, console: Console) -> BuildReport:
    tasks = load_dataset(cfg.dataset).tasks
    if not tasks:
        raise TrainerError(f"dataset {cfg.dataset.name!r} produced no tasks")
    build.out.mkdir(parents=True, exist_ok=True)
    builder = LocalBuilder(build)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        job = bar.add_task("building", total=len(tasks))

        def advance(o: Outcome) -> None:
            bar.update(job, advance=1, description=f"{o.id}: {o.status}")

        report = builder.build(tasks, progress=advance)
    write_jsonl(report.tasks, build.out / "tasks.jsonl")
    write_report(report, build.out)
    table = Table("task", "status", "env", "build s", "reason")
    for o in report.outcomes:
        table.add_row(o.id, o.status, o.env_key or "", str(o.build_s), o.reason)
    console.print(table)
    console.print(report.summary())
    console.print(f"tasks: {build.out / 'tasks.jsonl'}   report: {build.out / 'report.md'}")
    return report
