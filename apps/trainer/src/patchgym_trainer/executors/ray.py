"""``run.executor=ray``: validate / rollout episodes as Ray tasks on a cluster.

The driver keeps everything that makes a run resumable (the JSONL store, retries, the
summary and report); each episode, or each (task, patch) validation, is one Ray task
that builds the configured backend and policy on its worker, runs, closes its sandbox
and returns the result as JSON. Awaiting a Ray object ref does not block the driver's
event loop. Needs the ``ray`` extra (``pip install 'patchgym-trainer[ray]'``);
``ray.address`` picks the cluster (``auto``, ``host:port``; None starts a local one).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

from patchgym_agents import EpisodeResult, RolloutConfig
from patchgym_agents.envs_api import Task
from patchgym_agents.rollout import Executor, episode_kwargs
from patchgym_trainer.errors import TrainerError
from patchgym_trainer.executors import ray_admission
from patchgym_trainer.schema import AppConfig, RayConfig

NO_UV_HOOK = {"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
"""Ray's uv hook, on by default, makes every worker of a driver started under ``uv run``
run ``uv run`` again in a temporary copy of the working directory, which re-syncs the
driver's own virtualenv with editable installs pointing into that copy (deleted after the
run: the environment is then broken). Workers must use the environment as it is."""


def _ray() -> Any:
    for key, value in NO_UV_HOOK.items():  # read by Ray once, when it is first imported
        os.environ.setdefault(key, value)
    try:
        import ray
    except ImportError as exc:
        raise TrainerError(
            "run.executor=ray needs Ray: pip install 'patchgym-trainer[ray]'"
        ) from exc
    return ray


def connect(settings: RayConfig) -> Any:
    """Join (or start) the Ray cluster once per process; returns the ``ray`` module."""
    ray = _ray()
    if not ray.is_initialized():
        try:
            ray.init(address=settings.address, log_to_driver=False, include_dashboard=False)
        except ConnectionError as exc:
            raise TrainerError(f"ray.address={settings.address!r}: {exc}") from None
    return ray


def _episode_on_worker(
    app_json: str,
    rollout_json: str,
    run_id: str,
    task_json: str,
    sample: int,
    attempt: int,
    admission: str | None = None,
) -> str:
    """One rollout episode on a Ray worker (its own event loop, backend and policy)."""
    from patchgym_agents import run_episode
    from patchgym_sandbox import create_backend
    from patchgym_trainer.commands.rollout import make_policy

    cfg = AppConfig.model_validate_json(app_json)
    rc = RolloutConfig.model_validate_json(rollout_json)
    task = Task.model_validate_json(task_json)

    async def go() -> EpisodeResult:
        backend = create_backend(rc.env.sandbox)
        ray_admission.join(_ray(), backend, admission)
        policy = await make_policy(cfg)
        try:
            return await run_episode(
                task,
                policy,
                backend=backend,
                sample=sample,
                attempt=attempt,
                **episode_kwargs(rc, run_id),
            )
        finally:
            await policy.aclose()
            await backend.aclose()

    result = asyncio.run(go())  # a worker process's top level, not library code
    result.executed_on = _node()
    return result.model_dump_json()


def _validate_on_worker(
    app_json: str, task_json: str, kind: str, run_id: str, admission: str | None = None
) -> str:
    """One (task, patch) validation on a Ray worker."""
    from patchgym_sandbox import create_backend
    from patchgym_trainer.commands.validate import evaluate_one

    cfg = AppConfig.model_validate_json(app_json)
    task = Task.model_validate_json(task_json)

    async def go() -> str:
        backend = create_backend(cfg.sandbox)
        ray_admission.join(_ray(), backend, admission)
        try:
            res = await evaluate_one(task, kind, backend, run_id=run_id, env=cfg.env)  # type: ignore[arg-type]  # kind is a PatchKind read back from JSON
        finally:
            await backend.aclose()
        return json.dumps({**res.model_dump(mode="json"), "executed_on": _node()})

    return asyncio.run(go())


def _node() -> str:
    import socket

    ray = _ray()
    try:
        node = ray.get_runtime_context().get_node_id()
    except Exception:
        node = "?"
    return f"{socket.gethostname()}/ray-node-{str(node)[:8]}"


def episode_executor(cfg: AppConfig, rc: RolloutConfig, run_id: str) -> Executor:
    """An :data:`Executor` for :func:`patchgym_agents.rollout` that runs on Ray."""
    ray = connect(cfg.ray)
    remote = ray.remote(num_cpus=cfg.ray.num_cpus_per_episode, max_retries=0)(_episode_on_worker)
    app_json, rc_json = cfg.model_dump_json(by_alias=True), rc.model_dump_json()
    actor = ray_admission.start_actor(ray, rc.env.sandbox, run_id)

    async def execute(task: Task, sample: int, attempt: int) -> EpisodeResult:
        admission = actor[0] if actor is not None else None  # the closure holds the actor
        ref = remote.remote(
            app_json, rc_json, run_id, task.model_dump_json(), sample, attempt, admission
        )
        return EpisodeResult.model_validate_json(await ref)

    return execute


ValidateFn = Callable[[Task, str, str], Awaitable[dict[str, Any]]]


def validate_executor(cfg: AppConfig) -> ValidateFn:
    """(task, patch kind, run id) -> the :class:`PatchResult` fields, run as a Ray task."""
    ray = connect(cfg.ray)
    remote = ray.remote(num_cpus=cfg.ray.num_cpus_per_episode, max_retries=0)(_validate_on_worker)
    app_json = cfg.model_dump_json(by_alias=True)
    actors: dict[str, tuple[str, Any] | None] = {}  # run id -> the admission actor, held

    async def execute(task: Task, kind: str, run_id: str) -> dict[str, Any]:
        if run_id not in actors:
            actors[run_id] = ray_admission.start_actor(ray, cfg.sandbox, run_id)
        actor = actors[run_id]
        name = actor[0] if actor is not None else None
        data: dict[str, Any] = json.loads(
            await remote.remote(app_json, task.model_dump_json(), kind, run_id, name)
        )
        return data

    return execute
