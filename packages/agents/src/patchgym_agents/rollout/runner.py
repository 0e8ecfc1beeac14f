"""``rollout``: N tasks × K samples, concurrently, on any backend, resumable.

It owns the order create → episode → grade → close: each episode's environment creates
its sandbox at the first step and closes it in ``finally``; at the end of the run every
sandbox still labelled with this run's id is listed (reported as leaked) and removed.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from patchgym_agents.envs_api import SWEEnv, Task
from patchgym_agents.episode import EpisodeResult, run_episode
from patchgym_agents.history import ContextBudget
from patchgym_agents.policies.base import Policy
from patchgym_agents.rollout.config import RolloutConfig
from patchgym_agents.rollout.store import ResultStore
from patchgym_agents.rollout.summary import RolloutSummary, summarise
from patchgym_sandbox import Sandbox, SandboxBackend, SandboxGroups, SandboxSpec, create_backend
from patchgym_sandbox import labels as L
from patchgym_sandbox.retry import Retry, RetryPolicy

log = logging.getLogger(__name__)

ResultHook = Callable[[EpisodeResult], None]
Executor = Callable[[Task, int, int], Awaitable[EpisodeResult]]
"""Runs (task, sample, attempt) somewhere else (a Ray cluster) and returns its result."""


def default_run_id(config: RolloutConfig) -> str:
    digest = hashlib.sha1(str(config.output_dir.resolve()).encode()).hexdigest()[:10]
    return f"rollout-{digest}"


class _InfraFailed(Exception):
    """An episode ended on infrastructure: worth another attempt (the shared retry policy)."""

    def __init__(self, result: EpisodeResult) -> None:
        super().__init__(result.infra_error)
        self.result = result


class _Counters:
    def __init__(self) -> None:
        self.done = 0
        self.resolved = 0
        self.infra = 0
        self.errors = 0

    def add(self, r: EpisodeResult) -> None:
        self.done += 1
        self.resolved += bool(r.resolved)
        self.infra += r.status == "infra_error"
        self.errors += r.status == "error"


def episode_kwargs(cfg: RolloutConfig, run_id: str) -> dict[str, Any]:
    """The :func:`run_episode` settings of a run (the same in this process or a worker)."""
    env = cfg.env if cfg.env.run_id else cfg.env.model_copy(update={"run_id": run_id})
    return {
        "env": env,
        "tool_format": cfg.tool_format,
        "budget": ContextBudget(max_tokens=cfg.max_context_tokens),
        "model_timeout_s": cfg.model_timeout_s,
    }


def _groups_for(cfg: RolloutConfig, backend: SandboxBackend) -> SandboxGroups | None:
    """Groups for the samples of a task, when there are several and groups are on."""
    if cfg.samples < 2 or not cfg.sandbox_groups:
        return None
    return SandboxGroups(backend, linger_s=cfg.env.episode_timeout_s)


async def rollout(
    tasks: Sequence[Task],
    policy: Policy,
    config: RolloutConfig | None = None,
    *,
    backend: SandboxBackend | None = None,
    on_result: ResultHook | None = None,
    executor: Executor | None = None,
) -> RolloutSummary:
    """Run every (task, sample) not already graded in ``config.output_dir``; return the summary.

    ``backend``: share an existing backend (not closed here); otherwise one is built from
    ``config.env.sandbox`` and closed at the end. ``executor``: run each attempt elsewhere
    (retries, the JSONL store, resume and the summary stay here).
    """
    cfg = config or RolloutConfig()
    run_id = cfg.env.run_id or default_run_id(cfg)
    store = ResultStore(cfg.output_dir)
    previous = store.load() if cfg.resume else {}
    wanted = {(t.id, k) for t in tasks for k in range(cfg.samples)}
    results = {key: r for key, r in previous.items() if key in wanted}
    todo = [
        (task, k)
        for task in tasks
        for k in range(cfg.samples)
        if (prev := previous.get((task.id, k))) is None or prev.status == "infra_error"
    ]
    owns_backend = backend is None
    be = backend or create_backend(cfg.env.sandbox)
    live: set[SWEEnv] = set()
    counters = _Counters()
    todo_keys = {(t.id, k) for t, k in todo}
    for key, r in results.items():
        if key not in todo_keys:
            counters.add(r)
    sem = asyncio.Semaphore(cfg.concurrency)
    kwargs = episode_kwargs(cfg, run_id)
    infra_retry = RetryPolicy(
        attempts=cfg.infra_retries + 1, base_s=cfg.retry_backoff_s, max_s=60 * cfg.retry_backoff_s
    )
    groups = _groups_for(cfg, be) if executor is None else None
    todo_per_task: dict[str, int] = {}
    for t, _ in todo:
        todo_per_task[t.id] = todo_per_task.get(t.id, 0) + 1
    start = time.monotonic()

    async def _attempt(task: Task, sample: int, attempt: int) -> EpisodeResult:
        provision = None
        if groups is not None and attempt == 1:  # a retry starts its own sandbox

            async def provision(_: SandboxBackend, spec: SandboxSpec) -> Sandbox:
                return await groups.claim(task.id, spec, n=todo_per_task[task.id])

        try:
            if executor is not None:
                return await executor(task, sample, attempt)
            return await run_episode(
                task,
                policy,
                backend=be,
                sample=sample,
                attempt=attempt,
                live=live,
                provision=provision,
                **kwargs,
            )
        except Exception as exc:  # a bug somewhere: record it, keep the run going
            log.exception("episode %s/%d crashed", task.id, sample)
            return EpisodeResult(
                task_id=task.id,
                sample=sample,
                attempt=attempt,
                status="error",
                error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}",
            )

    async def one(task: Task, sample: int) -> EpisodeResult:
        infra: list[str] = []

        async def once() -> EpisodeResult:
            res = await _attempt(task, sample, len(infra) + 1)
            if res.status == "infra_error":
                infra.append(res.infra_error or "infra error")
                raise _InfraFailed(res)
            return res

        retry = Retry(infra_retry, when=lambda e: isinstance(e, _InfraFailed), what=task.id)
        async with sem:
            try:
                res = await retry.acall(once)
            except _InfraFailed as failed:
                res = failed.result
                infra.pop()  # the last attempt's error is the result's own
        res.infra_attempts = infra
        await store.append(res)
        results[res.key] = res
        counters.add(res)
        if on_result is not None:
            on_result(res)
        return res

    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(
            "resolved {task.fields[resolved]} · infra {task.fields[infra]} · "
            "errors {task.fields[errors]} · sandboxes {task.fields[live]}"
        ),
        TimeElapsedColumn(),
        disable=not cfg.progress,
        transient=False,
    )
    total = len(tasks) * cfg.samples
    leaked: list[str] = []
    try:
        with progress:
            bar = progress.add_task(
                "episodes", total=total, completed=0, resolved=0, infra=0, errors=0, live=0
            )

            def refresh() -> None:
                progress.update(
                    bar,
                    completed=counters.done,
                    resolved=counters.resolved,
                    infra=counters.infra,
                    errors=counters.errors,
                    live=sum(e.sandbox is not None for e in list(live)),
                )

            jobs = [asyncio.create_task(one(t, k)) for t, k in todo]
            try:
                pending = set(jobs)
                while pending:
                    _, pending = await asyncio.wait(pending, timeout=0.5)
                    refresh()
            finally:  # interrupted: stop the episodes (each closes its sandbox) before reaping
                for j in jobs:
                    j.cancel()
                await asyncio.gather(*jobs, return_exceptions=True)
            refresh()
            for j in jobs:
                j.result()  # surface anything unexpected
    finally:
        if groups is not None:
            await groups.aclose()
        try:
            found = await be.list_sandboxes({L.RUN_ID: run_id})
            leaked = [i.id for i in found]
            if leaked:
                log.warning("removing %d sandboxes left by run %s: %s", len(leaked), run_id, leaked)
                await be.reap({L.RUN_ID: run_id}, expired=False)
        finally:
            if owns_backend:
                await be.aclose()
    summary = summarise(
        results.values(),
        run_id=run_id,
        policy=policy.name,
        scaffold=cfg.env.scaffold,
        tasks=len(tasks),
        samples=cfg.samples,
        wall_s=time.monotonic() - start,
        leaked=leaked,
        output_dir=str(cfg.output_dir),
    )
    store.write_summary(summary.model_dump(mode="json"))
    return summary
