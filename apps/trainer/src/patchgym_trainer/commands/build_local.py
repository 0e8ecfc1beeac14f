"""``patchgym datasets build-local``: the configured dataset as tasks the local backend runs
without Docker (repository at base commit + a uv environment per install spec).

Writes ``<out>/tasks.jsonl`` (only the rows that built and passed the parity gate),
``<out>/report.json``, a per-row table ``<out>/report.md`` (with each environment's
resolved versions and every dropped test's evidence) and the gate's test logs under
``<out>/logs/``; prints how many rows can run locally. Every file is written whole or not at
all: a full disk ends the command with one line naming the file and what ``<out>`` kept.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from patchgym_envs.localbuild import (
    BuildFailed,
    BuildReport,
    LocalBuildConfig,
    LocalBuilder,
    Outcome,
)
from patchgym_envs.localbuild.cluster import load_image
from patchgym_envs.localbuild.images import for_docker
from patchgym_envs.localbuild.probe import Gate, GateFailed, parity_gate
from patchgym_envs.task import Task
from patchgym_envs.writers import jsonl_line
from patchgym_sandbox import SandboxBackend, create_backend
from patchgym_trainer.datasets import load_dataset
from patchgym_trainer.errors import TrainerError
from patchgym_trainer.outputs import kept_on_full_disk, write_bytes, write_text
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
    write_text(
        out / "report.json",
        json.dumps(
            {
                "outcomes": [o.model_dump(mode="json") for o in report.outcomes],
                "envs": {k: e.model_dump(mode="json") for k, e in report.envs.items()},
            },
            indent=1,
        ),
    )
    lines = [
        f"# build-local: {report.summary()}",
        "",
        "| task | repo | status | env | as of | shared | template MiB | env MiB | build s "
        "| dropped | gate | image | reason |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for o in report.outcomes:
        lines.append(
            f"| {o.id} | {o.repo} | {o.status} | {o.env_key or ''} | {o.as_of or 'today'} "
            f"| {'yes' if o.env_shared else ''} | {_mib(o.template_bytes)} | {_mib(o.env_bytes)} "
            f"| {o.build_s} | {len(o.network_tests)} | {o.gate} | {o.image or ''} | {o.reason} |"
        )
    dropped = [(o.id, t, e) for o in report.outcomes for t, e in o.network_tests.items()]
    if dropped:
        lines += ["", "## Tests dropped as network-bound (each on its own evidence)", ""]
        lines += ["| task | test | evidence |", "|---|---|---|"]
        lines += [f"| {i} | {t} | {e.replace('|', '/')} |" for i, t, e in dropped]
    for key, env in report.envs.items():
        lines += ["", f"## Environment {key} (resolved as of {env.as_of or 'today'})", ""]
        lines.append(", ".join(f"{n}=={v}" for n, v in sorted(env.packages.items())))
    write_text(out / "report.md", "\n".join(lines) + "\n")


def keep_logs(gate: Gate, out: Path) -> None:
    for kind, text in (("gold", gate.gold_log), ("empty", gate.empty_log)):
        if text:
            write_bytes(
                out / "logs" / f"{gate.task.id}.{kind}.log.gz", gzip.compress(text.encode())
            )


async def probe_network(
    report: BuildReport, backend: SandboxBackend, console: Console, *, allow_drop: int, out: Path
) -> None:
    """The parity gate on each built task: drop network-bound tests (at most ``allow_drop``),
    then gold must pass every kept test and empty fail every FAIL_TO_PASS."""
    outcomes = {o.id: o for o in report.outcomes}
    kept = []
    for task in report.tasks:
        outcome = outcomes[task.id]
        try:
            gate = await parity_gate(task, backend, allow_drop=allow_drop)
        except GateFailed as exc:
            keep_logs(exc.gate, out)
            outcome.status, outcome.reason = "unbuildable", str(exc)
            outcome.network_tests = exc.gate.network
            outcome.gate = "failed"
            continue
        except BuildFailed as exc:
            outcome.status, outcome.reason = "failed", f"probe: {exc}"
            continue
        keep_logs(gate, out)
        outcome.network_tests = {**outcome.network_tests, **gate.network}
        outcome.gate = gate.summary
        if gate.network:
            console.print(f"{task.id}: {len(gate.network)} tests need the network, dropped")
        kept.append(gate.task)
    report.tasks = kept


def images_for(report: BuildReport, build: LocalBuildConfig) -> None:
    """Give every built task its offline image (``FROM local/bookworm-py``), loaded into the
    cluster node's runtime for ``--for k8s``; a row whose image fails to build (or load) is
    reported failed and written nowhere."""
    outcomes = {o.id: o for o in report.outcomes}
    kept = []
    for task in report.tasks:
        outcome = outcomes[task.id]
        env = report.envs[task.metadata["local_env"]["key"]]
        try:
            built = for_docker(task, env, scratch=build.cache_dir)
            if build.target == "k8s":
                assert built.image is not None
                load_image(built.image, build.node_runtime)
        except BuildFailed as exc:
            outcome.status, outcome.reason = "failed", f"image: {exc}"
            continue
        outcome.image = built.image
        kept.append(built)
    report.tasks = kept


def build_rows(
    cfg: AppConfig, build: LocalBuildConfig, tasks: list[Task], console: Console, *, probe: bool
) -> BuildReport:
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
        console.print("parity gate: gold and empty patch once per task")
        backend = create_backend(cfg.sandbox)
        asyncio.run(
            probe_network(report, backend, console, allow_drop=build.allow_drop, out=build.out)
        )
    if build.target in ("docker", "k8s") and report.tasks:
        console.print(
            f"building offline images for {build.target}: one per environment, one per row"
        )
        images_for(report, build)
    return report


def build_local(
    cfg: AppConfig, build: LocalBuildConfig, console: Console, *, probe: bool = True
) -> BuildReport:
    tasks = load_dataset(cfg.dataset).tasks
    if not tasks:
        raise TrainerError(f"dataset {cfg.dataset.name!r} produced no tasks")
    with kept_on_full_disk(build.out):  # one line naming the file and what was kept (exit 4)
        report = build_rows(cfg, build, tasks, console, probe=probe)
        write_text(build.out / "tasks.jsonl", "".join(jsonl_line(t) for t in report.tasks))
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
