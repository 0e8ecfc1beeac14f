"""``rollout``: N tasks × K samples, concurrently, on any backend, resumable.

It owns the order prepare → create → episode → grade → close: the images pulled as-is
of the tasks to run are reduced first (:mod:`patchgym_agents.rollout.images`); each
episode's environment creates its sandbox at the first step and closes it in
``finally``; at the end of the run every sandbox still labelled with this run's id is
listed (reported as leaked) and removed.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import traceback
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from patchgym_agents.envs_api import Provision, SWEEnv, Task
from patchgym_agents.episode import EpisodeResult, run_episode
from patchgym_agents.history import ContextBudget
from patchgym_agents.policies.base import Policy
from patchgym_agents.rollout.config import RolloutConfig
from patchgym_agents.rollout.images import prepare_images
from patchgym_agents.rollout.progress import Counters, ProgressLine
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


@dataclass
class _Plan:
    """Where a (possibly resumed) run starts from."""

    results: dict[tuple[str, int], EpisodeResult]
    """This run's episodes already on disk; an infra-failed one stays until it is rerun."""
    todo: list[tuple[Task, int]]
    """The (task, sample) pairs to run: never run, or infra-failed last time."""

    @classmethod
    def of(
        cls, tasks: Sequence[Task], samples: int, previous: dict[tuple[str, int], EpisodeResult]
    ) -> _Plan:
        wanted = {(t.id, k) for t in tasks for k in range(samples)}
        return cls(
            results={key: r for key, r in previous.items() if key in wanted},
            todo=[
                (task, k)
                for task in tasks
                for k in range(samples)
                if (prev := previous.get((task.id, k))) is None or prev.status == "infra_error"
            ],
        )

    def finished(self) -> list[EpisodeResult]:
        """The kept results that will not run again (they count as done from the start)."""
        todo_keys = {(t.id, k) for t, k in self.todo}
        return [r for key, r in self.results.items() if key not in todo_keys]

    def todo_per_task(self) -> dict[str, int]:
        """How many samples of each task run now (the size of its sandbox group)."""
        per_task: dict[str, int] = {}
        for t, _ in self.todo:
            per_task[t.id] = per_task.get(t.id, 0) + 1
        return per_task


class _Episodes:
    """Runs one (task, sample) to a recorded result.

    An attempt runs here (:func:`run_episode`, the first one on a group's sandbox) or on the
    ``executor``; an infra-failed attempt is retried by the shared retry policy; a crash is
    recorded as an ``error`` result. The final result is appended to the store, counted
    and passed to ``on_result``.
    """

    def __init__(
        self,
        cfg: RolloutConfig,
        run_id: str,
        policy: Policy,
        backend: SandboxBackend,
        plan: _Plan,
        store: ResultStore,
        *,
        groups: SandboxGroups | None,
        executor: Executor | None,
        on_result: ResultHook | None,
    ) -> None:
        self.policy = policy
        self.backend = backend
        self.results = plan.results
        self.store = store
        self.groups = groups
        self.executor = executor
        self.on_result = on_result
        self.live: set[SWEEnv] = set()
        """Environments of running episodes (the progress line counts their sandboxes)."""
        self.counters = Counters(plan.finished())
        self.sem = asyncio.Semaphore(cfg.concurrency)
        self.kwargs = episode_kwargs(cfg, run_id)
        self.infra_retry = RetryPolicy(
            attempts=cfg.infra_retries + 1,
            base_s=cfg.retry_backoff_s,
            max_s=60 * cfg.retry_backoff_s,
        )
        self.todo_per_task = plan.todo_per_task()

    async def run(self, task: Task, sample: int) -> EpisodeResult:
        async with self.sem:
            res = await self._with_retries(task, sample)
        await self._record(res)
        return res

    async def _with_retries(self, task: Task, sample: int) -> EpisodeResult:
        """The last attempt's result; earlier attempts' infra errors in ``infra_attempts``."""
        infra: list[str] = []

        async def once() -> EpisodeResult:
            res = await self._attempt(task, sample, len(infra) + 1)
            if res.status == "infra_error":
                infra.append(res.infra_error or "infra error")
                raise _InfraFailed(res)
            return res

        retry = Retry(self.infra_retry, when=lambda e: isinstance(e, _InfraFailed), what=task.id)
        try:
            res = await retry.acall(once)
        except _InfraFailed as failed:
            res = failed.result
            infra.pop()  # the last attempt's error is the result's own
        res.infra_attempts = infra
        return res

    async def _attempt(self, task: Task, sample: int, attempt: int) -> EpisodeResult:
        try:
            if self.executor is not None:
                return await self.executor(task, sample, attempt)
            return await run_episode(
                task,
                self.policy,
                backend=self.backend,
                sample=sample,
                attempt=attempt,
                live=self.live,
                provision=self._provision(task, attempt),
                **self.kwargs,
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

    def _provision(self, task: Task, attempt: int) -> Provision | None:
        """A claim on the task's sandbox group; None (a sandbox of its own) for a retry."""
        groups = self.groups
        if groups is None or attempt != 1:
            return None
        n = self.todo_per_task[task.id]

        async def provision(_: SandboxBackend, spec: SandboxSpec) -> Sandbox:
            return await groups.claim(task.id, spec, n=n)

        return provision

    async def _record(self, res: EpisodeResult) -> None:
        await self.store.append(res)
        self.results[res.key] = res
        self.counters.add(res)
        if self.on_result is not None:
            self.on_result(res)


async def _run_all(
    todo: Sequence[tuple[Task, int]],
    run: Callable[[Task, int], Coroutine[Any, Any, EpisodeResult]],
    refresh: Callable[[], None],
) -> None:
    """Run every pair concurrently, redrawing the progress twice a second.

    Interrupted (cancelled, a signal), every episode is cancelled and awaited, so each
    closes its sandbox before the caller reaps what is left.
    """
    jobs = [asyncio.create_task(run(t, k)) for t, k in todo]
    try:
        pending = set(jobs)
        while pending:
            _, pending = await asyncio.wait(pending, timeout=0.5)
            refresh()
    finally:
        for j in jobs:
            j.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
    refresh()
    for j in jobs:
        j.result()  # surface anything unexpected


async def _close_run(
    backend: SandboxBackend, run_id: str, groups: SandboxGroups | None, *, owns_backend: bool
) -> list[str]:
    """Close the groups, remove the run's leftover sandboxes and return their ids (leaked).

    The backend is closed, when this run built it, even if listing or reaping fails.
    """
    if groups is not None:
        await groups.aclose()
    try:
        found = await backend.list_sandboxes({L.RUN_ID: run_id})
        leaked = [i.id for i in found]
        if leaked:
            log.warning("removing %d sandboxes left by run %s: %s", len(leaked), run_id, leaked)
            await backend.reap({L.RUN_ID: run_id}, expired=False)
        return leaked
    finally:
        if owns_backend:
            await backend.aclose()


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
    plan = _Plan.of(tasks, cfg.samples, store.load() if cfg.resume else {})
    owns_backend = backend is None
    be = backend or create_backend(cfg.env.sandbox)
    groups = _groups_for(cfg, be) if executor is None else None
    episodes = _Episodes(
        cfg, run_id, policy, be, plan, store, groups=groups, executor=executor, on_result=on_result
    )
    start = time.monotonic()
    progress = ProgressLine(episodes.counters, episodes.live, enabled=cfg.progress)
    try:
        if executor is None:  # a worker elsewhere (Ray) prepares on its own engine
            todo = list({t.id: t for t, _ in plan.todo}.values())
            await prepare_images(be, episodes.kwargs["env"], todo, enabled=cfg.progress)
        with progress.shown(total=len(tasks) * cfg.samples) as refresh:
            await _run_all(plan.todo, episodes.run, refresh)
    finally:
        leaked = await _close_run(be, run_id, groups, owns_backend=owns_backend)
    summary = summarise(
        plan.results.values(),
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
