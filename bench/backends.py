"""Sandbox backend benchmark: our exec vs the raw client call, lifecycle, and concurrency.

    UV_PROJECT_ENVIRONMENT=/tmp/venv-docker uv run --package patchgym-sandbox-docker \\
        python bench/backends.py --backend docker
    UV_PROJECT_ENVIRONMENT=/tmp/venv-k8s uv run --package patchgym-sandbox-k8s --with rich \\
        python bench/backends.py --backend k8s

One function per backend (``bench_docker``, ...) returns rows; ``BENCHES`` maps the
``--backend`` choice to it, so adding a backend is adding one function and one entry.
Every ratio compares numbers measured in the same run. Not a test: nothing here fails.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

console = Console(width=160)


@dataclass
class Row:
    backend: str
    metric: str
    value: str
    note: str = ""


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


async def timed(fn: Callable[[], Awaitable[object]], n: int, warmup: int = 3) -> list[float]:
    for _ in range(warmup):
        await fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - t0)
    return out


async def concurrent_rollouts(
    make: Callable[[], object], sandboxes: int, execs: int
) -> tuple[float, float]:
    """``sandboxes`` sandboxes at once, each: start, ``execs`` × exec(true), close.

    Returns (wall seconds, execs per second over the whole wall time).
    """

    async def one() -> None:
        sb = make()
        async with sb:  # type: ignore[attr-defined]
            for _ in range(execs):
                r = await sb.exec("true")  # type: ignore[attr-defined]
                assert r.exit_code == 0, r

    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(sandboxes)))
    wall = time.perf_counter() - t0
    return wall, sandboxes * execs / wall


async def lifecycle_row(backend: Any, spec: Any, label: str, n: int, note: str = "") -> Row:
    """create -> first exec(true) -> close, ``n`` times: p50 / p95."""

    async def lifecycle() -> None:
        async with backend.sandbox(spec) as s:
            assert (await s.exec("true")).exit_code == 0

    life = await timed(lifecycle, n, warmup=1)
    return Row(
        label,
        "create → first exec → close p50 / p95",
        f"{ms(pct(life, 0.5))} / {ms(pct(life, 0.95))}",
        f"n={len(life)}{note}",
    )


async def group_rows(backend: Any, spec: Any, label: str, n: int, rounds: int) -> list[Row]:
    """Time until each of n sandboxes has run its first exec: cold, group, warm pool.

    cold: n concurrent ``start()``; group: ``backend.create_group(spec, n)`` with no pool
    open (the generic path); warm pool: n ``claim()`` from a pool filled beforehand;
    group from pool: ``create_group`` while a pool of that shape is open; fork:
    ``Sandbox.fork(n)`` of one sandbox started (prepared) before the clock. Sandboxes are
    closed after the clock stops. Rounds interleave the contenders.
    """
    from patchgym_sandbox.pool import close_all

    async def first_execs(boxes: list[Any]) -> None:
        res = await asyncio.gather(*(b.exec("true") for b in boxes))
        assert all(r.exit_code == 0 for r in res), res

    async def cold() -> list[Any]:
        boxes = [backend.sandbox(spec) for _ in range(n)]
        await asyncio.gather(*(b.start() for b in boxes))
        return boxes

    async def group() -> list[Any]:
        return list(await backend.create_group(spec, n))

    parent = await backend.sandbox(spec).start()
    await parent.exec("true")

    async def fork() -> list[Any]:
        return list(await parent.fork(n))

    times: dict[str, list[float]] = {
        "cold": [], "group": [], "fork": [], "pool": [], "group+pool": []
    }  # fmt: skip
    fill: list[float] = []
    for _ in range(rounds):
        for name, make in (("cold", cold), ("group", group), ("fork", fork)):
            t0 = time.perf_counter()
            boxes = await make()
            await first_execs(boxes)
            times[name].append(time.perf_counter() - t0)
            await close_all(boxes)
        for name in ("pool", "group+pool"):
            async with backend.pool(spec, size=n) as pool:
                t0 = time.perf_counter()
                await pool.wait_ready(timeout=600)
                fill.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                if name == "pool":
                    boxes = list(await asyncio.gather(*(pool.claim() for _ in range(n))))
                else:
                    boxes = list(await backend.create_group(spec, n))
                await first_execs(boxes)
                times[name].append(time.perf_counter() - t0)
            await close_all(boxes)
    await parent.close()
    base = pct(times["cold"], 0.5)
    rows = [
        Row(
            label,
            f"group of {n}: time to first exec, {name} (p50)",
            ms(pct(xs, 0.5)),
            f"n={len(xs)}; cold/this = {base / pct(xs, 0.5):.1f}×"
            + (" (target ≥ 5×)" if name not in ("cold", "fork") else ""),
        )
        for name, xs in times.items()
    ]
    rows.append(
        Row(
            label,
            f"pool of {n}: fill before the claims (p50)",
            ms(pct(fill, 0.5)),
            "off the critical path",
        )
    )
    return rows


# -- docker ------------------------------------------------------------------------
async def bench_docker(args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    if args.only_groups:
        from patchgym_sandbox import SandboxSpec, create_backend

        labels = {"patchgym.bench": "backends"}
        backend = create_backend({"type": "docker", "labels": labels})
        try:
            return await group_rows(
                backend,
                SandboxSpec(image=args.image),
                "docker (server)",
                args.group,
                args.group_rounds,
            )
        finally:
            await backend.reap(labels, expired=False)
            await backend.aclose()
    for mode in args.docker_modes:
        rows += await bench_docker_mode(args, mode)
    return rows


async def bench_docker_mode(args: argparse.Namespace, mode: str) -> list[Row]:
    """One ``exec_mode`` of the docker backend against the SDK's ``container.exec_run``."""
    import docker

    from patchgym_docker.sandbox import DockerSandbox
    from patchgym_sandbox import SandboxSpec, create_backend

    label = f"docker ({mode})"
    rows: list[Row] = []
    backend = create_backend(
        {"type": "docker", "exec_mode": mode, "labels": {"patchgym.bench": "backends"}}
    )
    spec = SandboxSpec(image=args.image)
    client = docker.from_env(timeout=120)
    try:
        async with backend.sandbox(spec) as sb:
            assert isinstance(sb, DockerSandbox)
            raw = client.containers.get(sb.container_id)

            async def ours() -> None:
                assert (await sb.exec("true")).exit_code == 0

            async def baseline() -> None:
                assert (await asyncio.to_thread(raw.exec_run, "true")).exit_code == 0

            async def python_floor() -> None:
                await asyncio.to_thread(raw.exec_run, ["python3", "-I", "-S", "-c", "pass"])

            # interleave so drift (load, engine state) hits both sides alike
            mine: list[float] = []
            theirs: list[float] = []
            for _ in range(args.rounds):
                mine += await timed(ours, args.n // args.rounds, warmup=1)
                theirs += await timed(baseline, args.n // args.rounds, warmup=1)
            for name, xs in (
                ("ours: sandbox.exec('true')", mine),
                ("raw: container.exec_run('true')", theirs),
            ):
                rows.append(
                    Row(
                        label,
                        f"{name} p50 / p95",
                        f"{ms(pct(xs, 0.5))} / {ms(pct(xs, 0.95))}",
                        f"n={len(xs)}",
                    )
                )
            rows.append(
                Row(
                    label,
                    "exec ratio ours/raw (p50, p95)",
                    f"{pct(mine, 0.5) / pct(theirs, 0.5):.2f}× / {pct(mine, 0.95) / pct(theirs, 0.95):.2f}×",
                    "target ≤ 1.10×",
                )
            )
            if mode == "exec":
                floor = await timed(python_floor, max(10, args.n // 4))
                rows.append(
                    Row(
                        label,
                        "raw exec_run('python3 -I -S -c pass') p50",
                        ms(pct(floor, 0.5)),
                        "floor of a per-exec in-container supervisor",
                    )
                )

        rows.append(await lifecycle_row(backend, spec, label, args.lifecycle_n))
        if mode == "server":
            rows += await group_rows(backend, spec, label, args.group, args.group_rounds)
        for width in args.concurrency:
            wall, rate = await concurrent_rollouts(lambda: backend.sandbox(spec), width, args.execs)
            rows.append(
                Row(
                    label,
                    f"{width} sandboxes × {args.execs} execs (create+execs+close)",
                    f"{wall:.2f} s wall",
                    f"{rate:.1f} execs/s; {width / wall:.2f} sandboxes/s",
                )
            )
    finally:
        await backend.reap({"patchgym.bench": "backends"}, expired=False)
        await backend.aclose()
        client.close()
    return rows


# -- k8s ---------------------------------------------------------------------------
async def bench_k8s(args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    for i, mode in enumerate(args.k8s_modes):
        rows += await bench_k8s_mode(args, mode, lifecycle=i == 0)
    return rows


async def bench_k8s_mode(args: argparse.Namespace, mode: str, *, lifecycle: bool) -> list[Row]:
    """k8s backend (one ``exec_mode``) vs ``stream(connect_get_namespaced_pod_exec)`` on the same pod.

    ``server`` (default): commands go through the in-pod exec server over one long-lived
    stream; ``exec``: one exec stream per command. Lifecycle and concurrency rows are
    measured for the first mode only (they create dozens of pods).
    """
    import os
    import warnings

    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.stream import stream

    from patchgym_sandbox import SandboxSpec, create_backend
    from patchgym_sandbox.remote import remote_argv
    from patchgym_sandbox.sandbox import ExecRequest

    warnings.filterwarnings(
        "ignore", message="Unverified HTTPS request"
    )  # the test cluster's kubeconfig
    kubeconfig = os.environ.get("KUBECONFIG") or "/tmp/k8s/kubeconfig"
    # the loopback-only test cluster needs host-network pods (see packages/sandbox-k8s/README.md)
    host_network = os.environ.get("PATCHGYM_K8S_HOST_NETWORK", "1") != "0"
    rows: list[Row] = []
    labels = {"patchgym.bench": "backends"}
    backend = create_backend(
        {
            "type": "k8s",
            "kubeconfig": kubeconfig,
            "host_network": host_network,
            "labels": labels,
            "exec_mode": mode,
        }
    )
    label = f"k8s ({mode})"
    spec = SandboxSpec(image=args.image)
    conf = k8s_client.Configuration()
    k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=conf)
    core = k8s_client.CoreV1Api(k8s_client.ApiClient(conf))
    if args.only_groups:
        try:
            return await group_rows(backend, spec, label, args.group, args.group_rounds)
        finally:
            await backend.reap(labels, expired=False)
            await backend.aclose()
            core.api_client.close()
    try:
        async with backend.sandbox(spec) as sb:

            def raw(argv: list[str]) -> None:
                stream(
                    core.connect_get_namespaced_pod_exec,
                    sb.id,
                    "default",
                    command=argv,
                    stderr=True,
                    stdin=False,
                    stdout=True,
                    tty=False,
                )

            async def ours() -> None:
                assert (await sb.exec("true")).exit_code == 0

            async def baseline() -> None:
                await asyncio.to_thread(raw, ["true"])

            req = ExecRequest("true", None, None, sb.workdir, {}, None, None, 1 << 20)

            async def raw_supervisor() -> None:
                await asyncio.to_thread(raw, remote_argv(req))

            async def python_floor() -> None:
                await asyncio.to_thread(raw, ["python3", "-I", "-S", "-c", "pass"])

            mine: list[float] = []
            theirs: list[float] = []
            sup: list[float] = []
            for _ in range(args.rounds):  # interleaved, so load drift hits every side alike
                mine += await timed(ours, args.n // args.rounds, warmup=1)
                theirs += await timed(baseline, args.n // args.rounds, warmup=1)
                sup += await timed(raw_supervisor, args.n // args.rounds, warmup=1)
            floor = await timed(python_floor, max(10, args.n // 4))
            for name, xs in (
                ("ours: sandbox.exec('true')", mine),
                ("raw: stream(connect_get_namespaced_pod_exec, ['true'])", theirs),
            ):
                rows.append(
                    Row(
                        label,
                        f"{name} p50 / p95",
                        f"{ms(pct(xs, 0.5))} / {ms(pct(xs, 0.95))}",
                        f"n={len(xs)}",
                    )
                )
            rows.append(
                Row(
                    label,
                    "exec ratio ours/raw (p50, p95)",
                    f"{pct(mine, 0.5) / pct(theirs, 0.5):.2f}× / {pct(mine, 0.95) / pct(theirs, 0.95):.2f}×",
                    "target ≤ 1.10×",
                )
            )
            rows.append(
                Row(
                    label,
                    "raw stream(supervisor argv for 'true') p50",
                    ms(pct(sup, 0.5)),
                    f"same in-pod supervisor, no patchgym client; ours/this = {pct(mine, 0.5) / pct(sup, 0.5):.2f}×",
                )
            )
            rows.append(
                Row(
                    label,
                    "raw stream(['python3','-I','-S','-c','pass']) p50",
                    ms(pct(floor, 0.5)),
                    "floor of any per-exec in-pod supervisor",
                )
            )

        if not lifecycle:
            return rows
        rows.append(
            await lifecycle_row(
                backend, spec, label, args.lifecycle_n, "; close waits until the pod is gone"
            )
        )
        rows += await group_rows(backend, spec, label, args.group, args.group_rounds)
        for width in args.concurrency:
            wall, rate = await concurrent_rollouts(lambda: backend.sandbox(spec), width, args.execs)
            rows.append(
                Row(
                    label,
                    f"{width} sandboxes × {args.execs} execs (create+execs+close)",
                    f"{wall:.2f} s wall",
                    f"{rate:.1f} execs/s; {width / wall:.2f} sandboxes/s",
                )
            )
    finally:
        await backend.reap(labels, expired=False)
        await backend.aclose()
        core.api_client.close()
    return rows


BENCHES: dict[str, Callable[[argparse.Namespace], Coroutine[Any, Any, list[Row]]]] = {
    "docker": bench_docker,
    "k8s": bench_k8s,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=[*BENCHES, "all"], default="all")
    parser.add_argument(
        "--image", default="local/patchgym-testbed:latest", help="image for docker/k8s"
    )
    parser.add_argument(
        "-n", type=int, default=100, help="execs per side for the exec latency comparison"
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="interleaved rounds for the comparison"
    )
    parser.add_argument("--lifecycle-n", type=int, default=10)
    parser.add_argument(
        "--execs", type=int, default=10, help="execs per sandbox in the concurrency runs"
    )
    parser.add_argument(
        "--docker-modes", nargs="+", choices=["server", "exec"], default=["server", "exec"]
    )
    parser.add_argument(
        "--k8s-modes", nargs="+", choices=["server", "exec"], default=["server", "exec"]
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--group", type=int, default=8, help="group size for the warm-pool rows")
    parser.add_argument("--group-rounds", type=int, default=3)
    parser.add_argument(
        "--only-groups", action="store_true", help="only the group-of-n time-to-first-exec rows"
    )
    args = parser.parse_args()
    chosen = list(BENCHES) if args.backend == "all" else [args.backend]
    table = Table(title="patchgym sandbox backends")
    for col in ("backend", "metric", "value", "note"):
        table.add_column(col)
    for name in chosen:
        console.print(f"[bold]benchmarking {name}…[/bold]")
        for row in asyncio.run(BENCHES[name](args)):
            table.add_row(row.backend, row.metric, row.value, row.note)
    console.print(table)


if __name__ == "__main__":
    main()
