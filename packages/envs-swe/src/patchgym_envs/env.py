"""``SWEEnv``: one task, one sandbox, one tool scaffold — rLLM's environment contract.

- ``from_dict(info)`` builds it from a verl/rLLM row's ``extra_info`` (the task) merged
  with env args; ``reset()`` is cheap and idempotent (no sandbox yet) and returns the
  problem statement; the sandbox is created at the first ``step``.
- ``step(action)`` takes a string (``<function=...>`` text), an object with ``.action``,
  an OpenAI tool call or a :class:`ToolCall`; it returns ``(observation, reward, done,
  info)``. A malformed action or a failing tool is an error observation, never an
  exception.
- The episode ends on submit/finish, at ``max_steps`` or when the wall-clock budget is
  spent; grading then takes the agent's change as a binary diff, closes the episode's
  sandbox and runs the task's plan in a fresh one with only that diff applied (hidden
  tests staged only now); ``grading={"sandbox": "same"}`` grades in the episode's
  sandbox instead. The verdict's ``grading_sandbox`` says which. Sandboxes are closed
  in ``finally``, whatever happened.
- Infrastructure failures end the episode with ``info["infra_error"]`` and
  ``info["reward_valid"] = False``: mask such a sample instead of training on its 0.
- ``areset`` / ``astep`` / ``aclose`` are the async API; the blocking methods run it on a
  private loop thread, so they also work inside a running event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Literal, Self

from patchgym_envs import blame, cleanup, grading, rllm_compat
from patchgym_envs.config import ENV_ARG_KEYS, EnvConfig
from patchgym_envs.converters import ConvertOptions, convert_row
from patchgym_envs.evaluate import evaluate_patch
from patchgym_envs.grading import Verdict
from patchgym_envs.looprunner import LoopRunner
from patchgym_envs.sandboxes import (
    clean_patch,
    ensure_alive,
    run_setup,
)
from patchgym_envs.task import Task
from patchgym_envs.tools import (
    ActionParseError,
    Observation,
    Scaffold,
    ToolContext,
    ToolSettings,
    get_scaffold,
    to_tool_call,
)
from patchgym_envs.tools.markup import ActionInvalid, check_value
from patchgym_sandbox import (
    InfraError,
    Sandbox,
    SandboxBackend,
    SandboxClosed,
    SandboxLost,
    SandboxSpec,
    create_backend,
)
from patchgym_sandbox.tracing import PhaseClock

Provision = Callable[[SandboxBackend, SandboxSpec], Awaitable[Sandbox]]
"""Hands the env a started sandbox for a spec (a claim from a pool or a group)."""

_log = logging.getLogger(__name__)

DoneReason = Literal["submitted", "max_steps", "timeout", "infra_error", "closed", "sandbox_died"]
"""``sandbox_died``: the policy's own processes ended its sandbox (scored 0, see ``blame``)."""


RLLM_ROW_KEYS = frozenset({"step_timeout", "reward_timeout", "delete_image", "verbose"})
"""rLLM's env args that ``from_dict`` takes out of a merged row (``entry``/``dataset`` stay)."""
TASK_ROW_KEYS = frozenset(Task.model_fields)


class SWEEnv:
    """A SWE task as an RL environment (see module docstring)."""

    def __init__(
        self,
        task: Task | Mapping[str, Any] | None = None,
        *,
        config: EnvConfig | Mapping[str, Any] | None = None,
        backend: SandboxBackend | str | None = None,
        idx: Any = None,
        provision: Provision | None = None,
        **env_args: Any,
    ) -> None:
        # rLLM's SWEEnv spellings (see rllm_compat): entry/dataset, backend="kubernetes", ...
        task, self._eval_timeout, self.verbose = rllm_compat.translate(env_args, task=task, idx=idx)
        if isinstance(backend, str):
            env_args["sandbox"] = rllm_compat.backend_sandbox(backend, env_args.get("sandbox"))
            backend = None
        rllm_compat.check_unknown(env_args, ENV_ARG_KEYS)
        base = EnvConfig.model_validate(dict(config)) if isinstance(config, Mapping) else config
        if base is not None and not env_args:
            self.config = base
        else:  # a shallow merge: the sandbox node stays the validated object
            self.config = EnvConfig.model_validate({**(dict(base) if base else {}), **env_args})
        self.task: Task | None = self._task_of(task) if task is not None else None
        self.scaffold: Scaffold = get_scaffold(self.config.scaffold)
        if self.config.reward is not None:
            grading.check_reward_config(self.config.reward)
        self._backend = backend
        self._owns_backend = backend is None
        self._idx = idx
        self._provision = provision
        self._sandbox: Sandbox | None = None
        self._sandbox_loop: asyncio.AbstractEventLoop | None = None
        self._ctx: ToolContext | None = None
        self._runner: LoopRunner | None = None
        self._thread_lock = threading.Lock()
        cleanup.arm()  # from the constructing (usually main) thread: SIGTERM closes sandboxes
        self._alock: asyncio.Lock | None = None
        self._reset_state()

    # -- rLLM contract -------------------------------------------------------------
    @classmethod
    def from_dict(cls, info: Mapping[str, Any] | str) -> Self:
        """Build from a row's ``extra_info`` (the task) merged with env args.

        A classmethod, so an adapter subclass (e.g. one that also derives from rLLM's
        ``BaseEnv``) gets instances of itself.

        Keys that are :class:`EnvConfig` fields are env args; ``task`` may hold the task
        (a mapping or a ``Task``); otherwise the remaining keys are the task row itself
        (any format :func:`convert_row` reads). ``idx`` / ``index`` set :attr:`idx`.
        """
        import json

        data: dict[str, Any] = json.loads(info) if isinstance(info, str) else dict(info)
        env_args = {k: data.pop(k) for k in list(data) if k in ENV_ARG_KEYS | RLLM_ROW_KEYS}
        rllm_compat.check_task_row(data, TASK_ROW_KEYS)
        idx = data.pop("idx", data.get("index"))
        task = data.pop("task", None)
        backend = data.pop("backend", None)
        return cls(task if task is not None else data, idx=idx, backend=backend, **env_args)

    @staticmethod
    def is_multithread_safe() -> bool:
        return True

    @property
    def idx(self) -> Any:
        return self._idx

    @idx.setter
    def idx(self, value: Any) -> None:
        self._idx = value

    @property
    def infra_error(self) -> str | None:
        """The infrastructure failure that ended this episode, if any (then the reward is void)."""
        return self._infra_error

    @property
    def verdict(self) -> Verdict | None:
        return self._verdict

    @property
    def done(self) -> bool:
        return self._done

    @property
    def sandbox(self) -> Sandbox | None:
        return self._sandbox

    def tool_schemas(self) -> list[dict[str, Any]]:
        return self.scaffold.tool_schemas()

    # -- blocking API ----------------------------------------------------------------
    def reset(
        self, task: Task | Mapping[str, Any] | None = None, **_: Any
    ) -> tuple[str, dict[str, Any]]:
        with self._thread_lock:
            if self._sandbox is None:  # cheap path: nothing to tear down, no loop needed
                return self._reset_sync(task)
            return self._loop().run(self.areset(task))

    def step(self, action: Any) -> tuple[str, float, bool, dict[str, Any]]:
        with self._thread_lock:
            return self._loop().run(self.astep(action))

    def compute_final_reward(self) -> float:
        with self._thread_lock:
            return self._loop().run(self.acompute_final_reward())

    def close(self) -> None:
        with self._thread_lock:
            runner, self._runner = self._runner, None
            if runner is not None:
                try:
                    runner.run(self.aclose())
                finally:
                    runner.stop()
            elif self._sandbox is not None or (self._backend is not None and self._owns_backend):
                # created through the async API and closed without it: use a short-lived loop
                closer = LoopRunner("patchgym-env-close")
                try:
                    closer.run(self.aclose())
                finally:
                    closer.stop()

    def close_now(self, timeout: float = 60.0) -> None:
        """Close from a signal handler: on the env's loop, without taking its thread lock
        (the interrupted ``step`` may hold it on this very thread)."""
        runner = self._runner
        if runner is None:
            self.close()
            return
        future = asyncio.run_coroutine_threadsafe(self.aclose(), runner.loop)
        future.result(timeout=timeout)

    # -- async API -------------------------------------------------------------------
    async def areset(
        self, task: Task | Mapping[str, Any] | None = None, **_: Any
    ) -> tuple[str, dict[str, Any]]:
        async with self._lock():
            await self._close_sandbox()
            return self._reset_sync(task)

    async def astep(self, action: Any) -> tuple[str, float, bool, dict[str, Any]]:
        async with self._lock():
            return await self._step(action)

    async def acompute_final_reward(self) -> float:
        """Grade now if the episode has not been graded (rLLM calls this after the loop)."""
        async with self._lock():
            if self._verdict is None and self._infra_error is None:
                try:
                    await self._ensure_sandbox()
                    await self._finish("max_steps")
                except InfraError as exc:
                    await self._failed(exc)
                finally:
                    await self._close_sandbox()
            return self._reward()

    async def aclose(self) -> None:
        await self._close_sandbox()
        if self._owns_backend and self._backend is not None:
            backend, self._backend = self._backend, None
            await backend.aclose()

    # -- internals -------------------------------------------------------------------
    def _reset_state(self) -> None:
        self._steps = 0
        self._done = False
        self._done_reason: DoneReason | None = None
        self._verdict: Verdict | None = None
        self._infra_error: str | None = None
        self._patch: str | None = None
        self._started_at: float | None = None
        self._format_errors = 0
        self._sandbox_made = False
        self._policy_acted = False
        self._spec: SandboxSpec | None = None
        self._flags: set[grading.HackFlag] = set()
        """What the episode's own actions showed (the verdict adds what grading found)."""
        self.phases = PhaseClock(
            "episode", {"task_id": self.task.id if self.task else "", "idx": str(self._idx)}
        )

    def _reset_sync(self, task: Task | Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
        if task is not None:
            self.task = self._task_of(task)
        if self.task is None:
            raise ValueError(
                "SWEEnv has no task: pass one to the constructor or to reset(task=...)"
            )
        self._reset_state()
        return self.task.problem_statement, {
            "task_id": self.task.id,
            "scaffold": self.scaffold.name,
            "tools": self.scaffold.tool_names,
            "workdir": self.task.workdir,
            "max_steps": self.config.max_steps,
        }

    def _task_of(self, task: Task | Mapping[str, Any]) -> Task:
        out = _as_task(task)
        if self._eval_timeout is not None:
            out = out.model_copy(update={"eval_timeout": self._eval_timeout})
        return out

    def _loop(self) -> LoopRunner:
        if self._runner is None:
            self._runner = LoopRunner()
        return self._runner

    def _lock(self) -> asyncio.Lock:
        if self._alock is None:
            self._alock = asyncio.Lock()
        return self._alock

    def _get_backend(self) -> SandboxBackend:
        if self._backend is None:
            self._backend = create_backend(self.config.sandbox)
            self._owns_backend = True
        return self._backend

    async def _ensure_sandbox(self) -> ToolContext:
        if self._ctx is not None and self._sandbox is not None:
            if self._sandbox_loop is not asyncio.get_running_loop():
                raise RuntimeError(
                    "this SWEEnv's sandbox was created on another event loop; use either the "
                    "blocking API or the async API for one episode, not both"
                )
            return self._ctx
        assert self.task is not None
        if self._sandbox_made:
            raise SandboxLost(
                f"the sandbox of this episode (task {self.task.id}) is gone; the episode ends "
                "here rather than continuing in a new, empty sandbox"
            )
        backend = self._get_backend()
        spec = await self.config.aspec(
            self.task,
            backend,
            rollout_id=f"{self.task.id}-{self._idx}" if self._idx is not None else None,
        )
        self._spec = spec
        self._sandbox_loop = asyncio.get_running_loop()
        with self.phases.phase("create", backend=backend.name):
            if self._provision is not None:
                sandbox = await self._provision(backend, spec)
                self._sandbox = sandbox
                self._sandbox_made = True
                cleanup.track(self)
            else:
                sandbox = backend.sandbox(spec)
                self._sandbox = sandbox
                self._sandbox_made = True
                cleanup.track(self)
                await sandbox.start()
        if self._provision is None:  # a pool's start waited before this episode began
            self.phases.record("admission", sandbox.admission_wait_s, within="create")
        with self.phases.phase("setup"):
            await run_setup(sandbox, self.task, timeout=self.config.setup_timeout_s)
        settings = ToolSettings(
            max_observation_chars=self.config.max_observation_chars,
            step_timeout_s=self.config.step_timeout_s,
            tool_timeout_s=self.config.tool_timeout_s,
            blocked_commands=tuple(self.config.blocked_commands),
        )
        self._ctx = ToolContext(
            sandbox=sandbox,
            shown_workdir=self.task.workdir,
            settings=settings,
            test_cmd=self.task.test_cmd,
        )
        return self._ctx

    async def _close_sandbox(self) -> None:
        ctx, self._ctx = self._ctx, None
        sandbox, self._sandbox = self._sandbox, None
        self._sandbox_loop = None
        try:
            if ctx is not None:
                await ctx.close_tool_state()
        finally:
            if sandbox is not None:
                with self.phases.phase("close"):
                    await sandbox.close()
                self.phases.end(done_reason=str(self._done_reason))

    def _info(self, obs: Observation | None, **extra: Any) -> dict[str, Any]:
        info: dict[str, Any] = {
            "step": self._steps,
            "task_id": self.task.id if self.task else None,
            "format_errors": self._format_errors,
            "elapsed_s": round(time.monotonic() - self._started_at, 3) if self._started_at else 0.0,
        }
        if obs is not None:
            info.update(tool=obs.tool, error=obs.error, truncated=obs.truncated)
        if self._done:
            info["done_reason"] = self._done_reason
            info["reward_valid"] = self._infra_error is None
            if self._infra_error is not None:
                info["infra_error"] = self._infra_error
            if self._verdict is not None:
                info["verdict"] = self._verdict.model_dump(mode="json")
                info["resolved"] = self._verdict.resolved
                info["binary_reward"] = self._verdict.reward
                info["hack_flags"] = [str(f) for f in self._verdict.flags]
                if self._verdict.shaped_reward is not None:
                    info["shaped_reward"] = self._verdict.shaped_reward
            if self._patch is not None:
                info["patch"] = self._patch
            info["phases"] = self.phases.summary()
            info["sandbox_s"] = round(self.phases.sandbox_s, 3)
        info.update(extra)
        return info

    def _infra(self, exc: BaseException) -> None:
        self._done = True
        self._done_reason = "infra_error"
        self._infra_error = f"{type(exc).__name__}: {exc}"

    async def _failed(self, exc: BaseException) -> None:
        """An infrastructure-typed failure: the policy's doing when its own sandbox died
        after it acted (still listed, not removed from outside) and a control sandbox of
        the same spec works (see ``blame``)."""
        sandbox = self._sandbox
        if (
            isinstance(exc, SandboxLost)
            and self._policy_acted
            and self._spec is not None
            and self._verdict is None
            and sandbox is not None
            and await blame.still_present(self._get_backend(), sandbox.id)
        ):
            await self._close_sandbox()
            if await blame.engine_healthy(self._get_backend(), self._spec):
                self._done = True
                self._done_reason = "sandbox_died"
                self._verdict = blame.policy_failure(
                    f"the episode's sandbox stopped working after the policy's commands, while "
                    f"a fresh sandbox of the same spec works: {exc}"
                ).with_flags(*self._flags)
                return
        self._infra(exc)

    async def _finish(self, reason: DoneReason) -> None:
        """Grade in a fresh sandbox with only the agent's diff (or in the same one)."""
        assert self.task is not None and self._sandbox is not None
        self._done = True
        self._done_reason = reason
        lifecycle: dict[str, float] = {}
        closed_before = self.phases.totals.get("close", 0.0)
        with self.phases.phase("grading"):
            fresh = self.config.grading.sandbox == "fresh"
            git_tampered, self._patch = await clean_patch(  # a liveness probe first
                self._sandbox,
                self.task.base_commit,
                timeout=self.config.step_timeout_s,
                closing=fresh,
            )
            if fresh:
                await self._close_sandbox()
                verdict = await evaluate_patch(
                    self.task,
                    self._patch,
                    self._get_backend(),
                    python=self.config.python,
                    run_id=self.config.run_id,
                    env=self.config,
                    blame_patch=True,
                    rollout_id=f"{self.task.id}-{self._idx}-grade"
                    if self._idx is not None
                    else None,
                    log_path=self._log_path(),
                    lifecycle=lifecycle,
                )
            else:
                verdict = await self._grade_same()
        # phase times: the episode sandbox's close (its own phase, timed inside grading)
        # and the fresh sandbox's create and close come out of grading's
        closed = self.phases.totals.get("close", 0.0) - closed_before
        self.phases.totals["grading"] = max(0.0, self.phases.totals["grading"] - closed)
        for name, seconds in lifecycle.items():
            self.phases.record(name, seconds, within="grading")
        if git_tampered:
            self._flags.add(grading.HackFlag.GIT_TAMPERED)
        verdict = verdict.with_flags(*self._flags)
        if self.config.reward is not None:
            verdict = grading.shaped(
                verdict, self.config.reward, steps=self._steps, format_errors=self._format_errors
            )
        self._verdict = verdict
        if verdict.infra_error is not None:
            self._infra_error = verdict.infra_error

    async def _grade_same(self) -> Verdict:
        """Grade in the episode's sandbox; a failure there is checked against a fresh
        grading without the patch (the policy had the run of this sandbox)."""
        assert self.task is not None and self._sandbox is not None
        try:
            verdict, log = await grading.grade_logged(self.task, self._sandbox, patch=self._patch)
            if (path := self._log_path()) is not None and log:
                grading.keep_log(path, log)
            await ensure_alive(self._sandbox)
        except (InfraError, *blame.SANDBOX_FILE_ERRORS) as exc:
            verdict = Verdict.infra(f"{type(exc).__name__}: {exc}")
            if isinstance(exc, SandboxLost) and not await blame.still_present(
                self._get_backend(), self._sandbox.id
            ):
                return verdict  # removed from outside
        verdict = verdict.model_copy(update={"grading_sandbox": "same"})
        if verdict.infra_error is None:
            return verdict
        await self._close_sandbox()
        control = await evaluate_patch(
            self.task, "", self._get_backend(), python=self.config.python,
            run_id=self.config.run_id, env=self.config,
        )  # fmt: skip
        if control.infra_error is not None:
            return verdict
        return blame.policy_failure(
            f"grading in the episode's sandbox failed, and not in a fresh one without the "
            f"patch: {verdict.infra_error}",
            grading_sandbox="same",
        )

    def _log_path(self) -> Path | None:
        """Where this episode's grading log is kept (``EnvConfig.grading_logs``)."""
        if self.config.grading_logs is None or self.task is None:
            return None
        name = f"{self.task.id}.{self._idx if self._idx is not None else uuid.uuid4().hex[:8]}"
        return Path(self.config.grading_logs) / f"{name}.log.gz"

    def _reward(self) -> float:
        if self._verdict is None or self._infra_error is not None:
            return 0.0
        if self.config.reward is not None and self._verdict.shaped_reward is not None:
            return self._verdict.shaped_reward
        return self._verdict.reward

    async def _step(self, action: Any) -> tuple[str, float, bool, dict[str, Any]]:
        if self.task is None:
            raise ValueError("SWEEnv has no task: call reset(task=...) first")
        if self._done:
            return "The episode is over; call reset() to start again.", 0.0, True, self._info(None)
        if self._started_at is None:
            self._started_at = time.monotonic()
        obs: Observation | None = None
        try:
            ctx = await self._ensure_sandbox()
            remaining = self.config.episode_timeout_s - (time.monotonic() - self._started_at)
            ctx.settings.step_timeout_s = max(1.0, min(self.config.step_timeout_s, remaining))
            errors_before = self._format_errors
            obs = await self._act(action, ctx)
            if self._format_errors == errors_before:  # a malformed action is not a step (rLLM)
                self._steps += 1
            if self.verbose:
                _log.info(
                    "task %s step %d: %r -> %s", self.task.id, self._steps, action, obs.text[:200]
                )
            elapsed = time.monotonic() - self._started_at
            if obs.submitted:
                await self._finish("submitted")
            elif elapsed >= self.config.episode_timeout_s:
                await self._finish("timeout")
            elif max(self._steps, self._format_errors) >= self.config.max_steps:
                await self._finish("max_steps")
        except SandboxClosed as exc:
            self._infra(exc)
        except InfraError as exc:
            await self._failed(exc)
        except BaseException as exc:  # cancelled, interrupted, or a bug outside the action
            self._infra(exc)
            await self._close_sandbox()
            raise
        finally:
            if self._done:
                await self._close_sandbox()
        if obs is not None:
            text = obs.text
        elif self._infra_error is None and self._verdict is not None:
            text = f"ERROR: {self._verdict.rejected}"
        else:
            text = f"Infrastructure error: {self._infra_error}"
        if self._done and self._done_reason != "submitted" and self._infra_error is None:
            text += f"\n[episode ended: {self._done_reason}]"
        return text, self._reward(), self._done, self._info(obs)

    async def _act(self, action: Any, ctx: ToolContext) -> Observation:
        """Run one action in the episode's sandbox; only infrastructure failures raise.

        Too large, too deep, unreadable, or crashing the parser or a tool: all of these
        are an error observation, and the next step runs in the same sandbox.
        """
        max_bytes, max_depth = self.config.max_action_bytes, self.config.max_action_depth
        try:
            if isinstance(action, (str, Mapping)):
                check_value(
                    action, max_bytes=max_bytes, max_depth=max_depth
                )  # before parsing: parsing cost stays bounded
            call = to_tool_call(action)
            check_value([call.name, call.arguments], max_bytes=max_bytes, max_depth=max_depth)
        except (ActionParseError, ActionInvalid) as exc:
            self._format_errors += 1
            return Observation(text=f"ERROR: {exc}", error=True)
        except Exception as exc:  # a parser bug or a hostile object: the model sees why
            self._format_errors += 1
            return Observation(
                text=f"ERROR: your action could not be read ({type(exc).__name__})", error=True
            )
        if grading.reads_git_outside_head(call.arguments):
            self._flags.add(grading.HackFlag.GIT_OUTSIDE_HEAD)
        try:
            self._policy_acted = True
            with self.phases.phase("tool", tool=call.name):
                return await self.scaffold.execute(call, ctx)
        except (InfraError, SandboxClosed):
            raise
        except Exception as exc:
            return Observation(
                text=f"ERROR: {call.name} failed: {type(exc).__name__}", error=True, tool=call.name
            )

    def __repr__(self) -> str:
        tid = self.task.id if self.task else None
        return f"<SWEEnv task={tid!r} scaffold={self.scaffold.name} step={self._steps} done={self._done}>"


def _as_task(task: Task | Mapping[str, Any]) -> Task:
    if isinstance(task, Task):
        return task
    return convert_row(task, "auto", ConvertOptions())
