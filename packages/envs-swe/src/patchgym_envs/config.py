"""``EnvConfig``: the one definition of an episode's settings, and where each default lives.

Every path that runs episodes (``patchgym validate`` / ``rollout``, the verl agent loop,
the rLLM adapters, the agents' rollout runner) passes one ``EnvConfig`` object down; a
setting keeps its name from the Hydra ``env`` node to the tools (``step_timeout_s`` is the
``timeout`` of each tool command's exec request). The ``sandbox`` node is validated here,
once, into the installed backend's own config class (the registry's two-step validation).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, field_validator

from patchgym_envs.cleanimages import Cleaned, CleanKey, clean_spec, keys_of, prepare
from patchgym_envs.sandboxes import DEFAULT_RESOURCES, grading_resources, spec_for
from patchgym_envs.task import Task
from patchgym_envs.tools.markup import MAX_ACTION_BYTES, MAX_ACTION_DEPTH
from patchgym_sandbox import BackendConfig, Resources, SandboxBackend, SandboxSpec
from patchgym_sandbox.registry import load_config


def _local() -> BackendConfig:
    return load_config({"type": "local"})


class GradingConfig(BaseModel):
    """Where the hidden tests run at the end of an episode."""

    model_config = ConfigDict(extra="forbid")

    sandbox: Literal["fresh", "same"] = "fresh"
    """``fresh``: a new sandbox from the same template/image with only the agent's diff
    (defeats planted site-packages, ``.pth`` files and background processes);
    ``same``: the episode's sandbox (cheaper where a second sandbox is costly)."""


class EnvConfig(BaseModel):
    """Environment arguments (the ``env_args`` of rLLM, a Hydra ``env`` node)."""

    model_config = ConfigDict(extra="forbid")

    sandbox: SerializeAsAny[BackendConfig] = Field(default_factory=_local)
    """Backend config: a mapping is validated against the backend's own config class."""
    scaffold: str = "r2egym"
    max_steps: int = Field(default=40, gt=0)
    episode_timeout_s: float = Field(default=1800.0, gt=0)
    """Wall-clock budget from the first step (sandbox creation included) to grading."""
    step_timeout_s: float = Field(default=120.0, gt=0)
    """Deadline of one tool command (the exec request's ``timeout``)."""
    tool_timeout_s: float | None = Field(default=None, gt=0)
    """Deadline of one whole tool call (every command and file operation in it); past it
    the call is abandoned as an error observation. ``None``: 3 × ``step_timeout_s`` + 60 s."""
    max_observation_chars: int = Field(default=12_000, ge=500)
    blocked_commands: list[str] = Field(default_factory=list)
    data_roots: list[str] = Field(default_factory=list)
    """Folders a row's local paths (``template``, ``metadata.local_env.path``) may lie in,
    besides the cache and folders ``build-local`` marked (see ``patchgym_envs.rowpaths``)."""
    python: str | None = None
    """Interpreter whose folder goes first on PATH in local sandboxes (default: ``sys.executable``)."""
    run_id: str | None = None
    lease_s: float | None = None
    resources: Resources = Field(default_factory=lambda: DEFAULT_RESOURCES.model_copy())
    """Limits of each episode's sandbox (default ``sandboxes.DEFAULT_RESOURCES``: 4 GiB
    memory, 1,024 processes, 4 GiB disk); a backend that cannot enforce one fails at start."""
    setup_timeout_s: float = Field(default=600.0, gt=0)
    max_action_bytes: int = Field(default=MAX_ACTION_BYTES, ge=1024)
    """Largest action accepted (text, or a tool call's names and values); larger is an
    error observation that states the limit."""
    max_action_depth: int = Field(default=MAX_ACTION_DEPTH, ge=2)
    """Deepest nesting of an action's arguments (JSON arrays/objects)."""
    grading: GradingConfig = Field(default_factory=GradingConfig)
    """Grading options (``{"sandbox": "same"}`` to grade in the episode's sandbox)."""
    grading_logs: str | None = None
    """Folder where each grading's test log is kept (gzip, ``<task id>.<rollout>.log.gz``),
    so any verdict can be regraded later; None keeps none."""
    clean_pulled_images: bool = True
    """Start sandboxes of images pulled as-is (``swebench/sweb.eval.*``) with a ``.git``
    that holds only the base commit's history: a derivation made once per image where the
    backend can keep one (docker), else the reduction run in each sandbox at its start
    (k8s, e2b); see ``patchgym_envs.cleanimages``."""
    clean_concurrency: int = Field(default=4, gt=0)
    """Most images derived at once when a run prepares them (:meth:`prepare_images`)."""
    reward: dict[str, Any] | None = None
    """Opt-in shaped reward (``{"type": "debug_gym", "step_penalty": 0.01}``); when set,
    ``step`` returns the shaped value and ``info`` carries both rewards."""

    @field_validator("sandbox", mode="before")
    @classmethod
    def _backend_config(cls, value: Any) -> BackendConfig:
        return load_config(value)

    def sandbox_spec(
        self,
        task: Task,
        backend: SandboxBackend,
        *,
        rollout_id: str | None = None,
        grading: bool = False,
    ) -> SandboxSpec:
        """The spec of every sandbox an episode uses (its own and the fresh grading one):
        the one place its ``python``, ``run_id``, ``lease_s``, ``resources`` and ``data_roots``
        reach them. ``grading``: a fresh grading sandbox, whose memory limit has the
        grader's headroom on top (:func:`~patchgym_envs.sandboxes.grading_resources`)."""
        return spec_for(
            task,
            backend,
            python=self.python,
            run_id=self.run_id,
            rollout_id=rollout_id,
            lease_s=self.lease_s,
            resources=grading_resources(self.resources) if grading else self.resources,
            data_roots=self.data_roots,
        )

    async def aspec(
        self,
        task: Task,
        backend: SandboxBackend,
        *,
        rollout_id: str | None = None,
        grading: bool = False,
    ) -> SandboxSpec:
        """:meth:`sandbox_spec`, with an image pulled as-is replaced by its reduced
        derivation, or reduced at start (``clean_pulled_images``; see :meth:`prepare_images`)."""
        spec = self.sandbox_spec(task, backend, rollout_id=rollout_id, grading=grading)
        if not self.clean_pulled_images:
            return spec
        return await clean_spec(backend, spec, task.base_commit)

    def images_to_clean(self, tasks: Iterable[Task], backend: SandboxBackend) -> list[CleanKey]:
        """The distinct reductions the episodes of ``tasks`` need (none when
        ``clean_pulled_images`` is off)."""
        if not self.clean_pulled_images:
            return []
        return keys_of(backend, ((self.sandbox_spec(t, backend), t.base_commit) for t in tasks))

    async def prepare_images(
        self,
        keys: Sequence[CleanKey],
        backend: SandboxBackend,
        *,
        on_done: Callable[[Cleaned], None] | None = None,
    ) -> dict[CleanKey, str | None]:
        """Make the reductions of ``keys`` (:meth:`images_to_clean`) before the first
        episode, ``clean_concurrency`` at once; typed errors name every image that failed
        (:func:`patchgym_envs.cleanimages.prepare`)."""
        return await prepare(backend, keys, concurrency=self.clean_concurrency, on_done=on_done)


def default_of(name: str) -> Any:
    """The default of an ``EnvConfig`` field (for helpers that take one setting alone)."""
    return EnvConfig.model_fields[name].default


ENV_ARG_KEYS = frozenset(EnvConfig.model_fields)
