"""``patchgym datasets build-local``: the configured dataset as tasks the local backend runs
without Docker (repository at base commit + a uv environment per install spec).

Writes ``<out>/tasks.jsonl`` (only the rows that built), ``<out>/report.json`` and a
per-row table ``<out>/report.md``; prints how many rows can run locally.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from patchgym_envs import write_jsonl
from patchgym_envs.localbuild import (
    BuildFailed,
    BuildReport,
    LocalBuildConfig,
    LocalBuilder,
    Outcome,
)
from patchgym_envs.localbuild.probe import probe_gold, without_network_tests
from patchgym_sandbox import SandboxBackend, create_backend
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
        "| task | repo | status | env | shared | template MiB | env MiB | build s | network tests | reason |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for o in report.outcomes:
        lines.append(
            f"| {o.id} | {o.repo} | {o.status} | {o.env_key or ''} | {'yes' if o.env_shared else ''} "
            f"| {_mib(o.template_bytes)} | {_mib(o.env_bytes)} | {o.build_s} "
            f"| {', '.join(o.network_tests)} | {o.reason} |"
        )
    (out / "report.md").write_text("\n".join(lines) + "\n")


async def probe_network(report: BuildReport, backend: SandboxBackend, console: Console) -> None:
    """Run each built task's gold patch once; mark or drop tasks whose tests need the network."""
    outcomes = {o.id: o for o in report.outcomes}
    kept = []
    for task in report.tasks:
        outcome = outcomes[task.id]
        try:
            found = await probe_gold(task, backend)
        except BuildFailed as exc:
            outcome.status, outcome.reason = "failed", f"probe: {exc}"
            continue
        outcome.network_tests = sorted(found.network)
        if set(found.network) & set(task.fail_to_pass):
            outcome.status = "needs_network"
            outcome.reason = f"FAIL_TO_PASS needs the network: {sorted(found.network)[:3]}"
            continue
        if found.network:
            console.print(f"{task.id}: {len(found.network)} tests need the network, marked")
        kept.append(without_network_tests(task, found.network))
    report.tasks = kept


def build_local(
    cfg: AppConfig, build: LocalBuildConfig, console: Console, *, probe: bool = False
) -> BuildReport:
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
    if probe and report.tasks:
        console.print("probing: gold patch once per task, to find tests that need the network")
        asyncio.run(probe_network(report, create_backend(cfg.sandbox), console))
    write_jsonl(report.tasks, build.out / "tasks.jsonl")
    write_report(report, build.out)
    table = Table("task", "status", "env", "build s", "network tests", "reason")
    for o in report.outcomes:
        table.add_row(
            o.id, o.status, o.env_key or "", str(o.build_s), str(len(o.network_tests)), o.reason
        )
    console.print(table)
    console.print(report.summary())
    console.print(f"tasks: {build.out / 'tasks.jsonl'}   report: {build.out / 'report.md'}")
    return report
