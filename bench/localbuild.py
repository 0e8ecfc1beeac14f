"""Benchmark: real SWE-bench-style tasks built for the local backend vs one Docker image each.

Not a test: prints numbers and ratios, never fails on them. N tasks of one repository (the
semver 3.0.1 instance of apps/trainer/tests/localbuild, under N ids) are built with
``patchgym datasets build-local``: the first builds the shared uv environment, the rest only
check out a template. The Docker side builds what a per-task image must hold for the same
rows (base image + repository + environment + interpreter), one image per task, and we
compare build time and disk, then one gold episode's wall time on each backend.

    uv run python bench/localbuild.py [--n 8] [--no-docker]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "apps/trainer/tests/localbuild"
sys.path.insert(0, str(ROOT / "apps/trainer/tests"))

from test_build_local import semver_repo  # noqa: E402

from patchgym_envs import Task, evaluate_patch  # noqa: E402
from patchgym_envs.localbuild import LocalBuildConfig, LocalBuilder  # noqa: E402
from patchgym_envs.localbuild.envs import disk_usage  # noqa: E402
from patchgym_envs.readers import read_jsonl  # noqa: E402
from patchgym_sandbox import create_backend  # noqa: E402


def rows(n: int) -> list[Task]:
    from patchgym_envs.converters import convert_row

    (row,) = list(read_jsonl(FIXTURE / "semver.jsonl"))
    return [convert_row({**row, "instance_id": f"{row['instance_id']}-{i}"}) for i in range(n)]


def docker_images(tasks: list[Task], console: Console) -> tuple[list[float], list[int]]:
    """One image per task holding what a per-task image must: repo, env, interpreter."""
    times, sizes = [], []
    for task in tasks:
        env = task.metadata["local_env"]
        ctx = Path(tempfile.mkdtemp(prefix="pg-bench-ctx-"))
        try:
            for src, name in (
                (task.template, "repo"),
                (env["path"], "env"),
                (env["base_prefix"], "py"),
            ):
                subprocess.run(
                    ["cp", "-a", "--reflink=auto", str(src), str(ctx / name)], check=True
                )
            (ctx / "Dockerfile").write_text(
                "FROM local/bookworm-py\n"
                f"COPY py {env['base_prefix']}\nCOPY env {env['path']}\nCOPY repo /testbed\n"
            )
            tag = f"patchgym-bench/{task.id.lower()}:latest"
            t0 = time.monotonic()
            subprocess.run(
                ["docker", "build", "-q", "-t", tag, str(ctx)], check=True, capture_output=True
            )
            times.append(time.monotonic() - t0)
            inspect = subprocess.run(
                ["docker", "image", "inspect", "-f", "{{.Size}}", tag],
                capture_output=True,
                text=True,
                check=True,
            )
            sizes.append(int(inspect.stdout.strip()))
        finally:
            shutil.rmtree(ctx, ignore_errors=True)
    return times, sizes


async def episode(task: Task, sandbox: dict[str, object]) -> float:
    t0 = time.monotonic()
    verdict = await evaluate_patch(task, task.gold_patch, create_backend(sandbox))
    assert verdict.resolved, verdict
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--no-docker", action="store_true")
    args = ap.parse_args()
    console = Console()
    work = Path(tempfile.mkdtemp(prefix="pg-bench-localbuild-"))
    try:
        repo = semver_repo(work)
        cfg = LocalBuildConfig(
            out=work / "out", cache_dir=work / "cache",
            mirrors={"python-semver/python-semver": str(repo)}, specs=FIXTURE / "specs.yaml",
        )  # fmt: skip
        builder = LocalBuilder(cfg)
        built, secs = [], []
        for task in rows(args.n):
            t0 = time.monotonic()
            outcome, local = builder.build_one(task)
            secs.append(time.monotonic() - t0)
            assert local is not None, outcome
            built.append(local)
        env_bytes = disk_usage(Path(built[0].metadata["local_env"]["path"]))
        tmpl_bytes = [disk_usage(Path(t.template or "")) for t in built]
        local_disk = env_bytes + sum(tmpl_bytes)
        table = Table(title=f"{args.n} tasks of one repository")
        for col in ("approach", "first task s", "each further task s", "total build s", "disk MiB"):
            table.add_column(col)
        mib = 2**20
        table.add_row("local (shared uv env)", f"{secs[0]:.1f}", f"{sum(secs[1:]) / max(1, len(secs) - 1):.2f}",
                      f"{sum(secs):.1f}", f"{local_disk / mib:.0f}")  # fmt: skip
        summary: dict[str, object] = {
            "n": args.n,
            "local_build_s": sum(secs),
            "local_disk": local_disk,
        }
        local_ep = asyncio.run(episode(built[0], {"type": "local"}))
        summary["local_episode_s"] = local_ep
        if not args.no_docker:
            times, sizes = docker_images(built, console)
            table.add_row("docker (image per task)", f"{times[0]:.1f}", f"{sum(times[1:]) / max(1, len(times) - 1):.2f}",
                          f"{sum(times):.1f}", f"{sum(sizes) / mib:.0f} (apparent; shared base layer counted per image)")  # fmt: skip
            docker_task = built[0].model_copy(
                update={"image": f"patchgym-bench/{built[0].id.lower()}:latest", "template": None}
            )
            docker_ep = asyncio.run(episode(docker_task, {"type": "docker"}))
            summary.update(
                docker_build_s=sum(times), docker_disk=sum(sizes), docker_episode_s=docker_ep
            )
            console.print(table)
            console.print(
                f"build time docker/local: {sum(times) / sum(secs):.2f}x; "
                f"disk docker/local: {sum(sizes) / local_disk:.1f}x; "
                f"gold episode local {local_ep:.2f}s vs docker {docker_ep:.2f}s "
                f"(docker/local {docker_ep / local_ep:.2f}x)"
            )
            for task in built:
                subprocess.run(
                    ["docker", "rmi", "-f", f"patchgym-bench/{task.id.lower()}:latest"],
                    capture_output=True,
                )
        else:
            console.print(table)
            console.print(f"gold episode on local: {local_ep:.2f}s")
        console.print_json(json.dumps(summary))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
