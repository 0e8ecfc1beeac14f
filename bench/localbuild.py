"""Benchmark: real SWE-bench-style tasks built for the local backend vs one Docker image each.

Not a test: prints numbers and ratios, never fails on them. N tasks of one repository (the
semver 3.0.1 instance of apps/trainer/tests/localbuild, under N ids) are built with
``patchgym datasets build-local``, once for 1 row and once for N rows, each from an empty
cache: the mirror and the environment (one per spec, python and date) are shared, so N rows
cost one environment plus N templates. With Docker: ``build-local --for docker`` (one
environment image + a thin row layer each) against one self-contained image per row, as
the harness's ``swebench/sweb.eval.*`` images are (sizes from ``docker image inspect``).

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


def build_rows(work: Path, repo: Path, n: int) -> tuple[list[Task], float, int]:
    """Build ``n`` rows from an empty cache: (tasks, seconds, bytes of mirror+env+templates)."""
    cfg = LocalBuildConfig(
        out=work / f"out{n}", cache_dir=work / f"cache{n}",
        mirrors={"python-semver/python-semver": str(repo)}, specs=FIXTURE / "specs.yaml",
    )  # fmt: skip
    builder = LocalBuilder(cfg)
    t0 = time.monotonic()
    built = []
    for task in rows(n):
        outcome, local = builder.build_one(task)
        assert local is not None, outcome
        built.append(local)
    secs = time.monotonic() - t0
    return built, secs, disk_usage(cfg.cache_dir) + disk_usage(cfg.out)


def image_size(tag: str) -> int:
    done = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{.Size}}", tag],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return int(done.stdout.strip())


def offline_images(tasks: list[Task], work: Path) -> tuple[float, int, list[str]]:
    """``--for docker``: seconds, unique bytes (env image once + each row's own layer), tags."""
    from patchgym_envs.localbuild.envs import EnvInfo
    from patchgym_envs.localbuild.images import env_image, row_image

    t0 = time.monotonic()
    record = Path(tasks[0].metadata["local_env"]["path"]) / "env.json"
    env = EnvInfo.model_validate_json(record.read_text())
    env_tag = env_image(env, scratch=work)
    tags = [row_image(t, env_tag, scratch=work) for t in tasks]
    secs = time.monotonic() - t0
    env_bytes = image_size(env_tag)
    unique = env_bytes + sum(image_size(t) - env_bytes for t in tags)
    return secs, unique, [env_tag, *tags]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--no-docker", action="store_true")
    args = ap.parse_args()
    console = Console()
    work = Path(tempfile.mkdtemp(prefix="pg-bench-localbuild-"))
    mib = 2**20
    try:
        repo = semver_repo(work)
        _, one_s, one_disk = build_rows(work, repo, 1)
        built, n_s, n_disk = build_rows(work, repo, args.n)
        table = Table(
            title=f"build-local: 1 row vs {args.n} rows of one repository (empty cache each)"
        )
        for col in ("approach", "1 row s", f"{args.n} rows s", "1 row MiB", f"{args.n} rows MiB",
                    f"time {args.n}/1", f"disk {args.n}/1"):  # fmt: skip
            table.add_column(col)
        table.add_row("local (mirror + one uv env + templates)", f"{one_s:.1f}", f"{n_s:.1f}",
                      f"{one_disk / mib:.0f}", f"{n_disk / mib:.0f}", f"{n_s / one_s:.2f}x",
                      f"{n_disk / one_disk:.2f}x")  # fmt: skip
        summary: dict[str, object] = {
            "n": args.n, "local_1_s": one_s, "local_n_s": n_s,
            "local_1_disk": one_disk, "local_n_disk": n_disk,
        }  # fmt: skip
        console.print(
            f"local: 1 row {one_s:.1f}s {one_disk / mib:.0f} MiB; {args.n} rows {n_s:.1f}s "
            f"{n_disk / mib:.0f} MiB (time {n_s / one_s:.2f}x, disk {n_disk / one_disk:.2f}x)"
        )
        local_ep = asyncio.run(episode(built[0], {"type": "local"}))
        summary["local_episode_s"] = local_ep
        if not args.no_docker:
            off_s, off_disk, off_tags = offline_images(built, work)
            console.print(
                f"--for docker, {args.n} rows: {off_s:.1f}s, {off_disk / mib:.0f} MiB unique"
            )
            times, sizes = docker_images(built, console)
            table.add_row("docker --for docker (env image + row layers)", "", f"{off_s:.1f}", "",
                          f"{off_disk / mib:.0f}", "", "")  # fmt: skip
            table.add_row("docker, one self-contained image per row", f"{times[0]:.1f}",
                          f"{sum(times):.1f}", f"{sizes[0] / mib:.0f}", f"{sum(sizes) / mib:.0f}",
                          f"{sum(times) / times[0]:.2f}x", f"{sum(sizes) / sizes[0]:.2f}x")  # fmt: skip
            docker_task = built[0].model_copy(update={"image": off_tags[1]})
            docker_ep = asyncio.run(episode(docker_task, {"type": "docker"}))
            summary.update(
                offline_images_s=off_s, offline_images_disk=off_disk,
                per_row_images_s=sum(times), per_row_images_disk=sum(sizes),
                docker_episode_s=docker_ep,
            )  # fmt: skip
            console.print(table)
            console.print(
                f"{args.n} rows: per-row images / offline images disk {sum(sizes) / off_disk:.1f}x; "
                f"per-row images / local disk {sum(sizes) / n_disk:.1f}x; gold episode local "
                f"{local_ep:.2f}s vs docker {docker_ep:.2f}s"
            )
            for tag in [*off_tags[1:], off_tags[0]] + [
                f"patchgym-bench/{t.id.lower()}:latest" for t in built
            ]:
                subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
        else:
            console.print(table)
            console.print(f"gold episode on local: {local_ep:.2f}s")
        console.print_json(json.dumps(summary))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
