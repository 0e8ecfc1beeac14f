"""Turn SWE-bench-style tasks into tasks the local backend runs with no image at all.

For each task: the repository at ``base_commit`` becomes its template (a clone from a cached
mirror), its repo/version's install spec becomes a uv environment shared by every task
with the same spec, and the task's eval script and PATH point at that environment. A task
that cannot be built is reported with the reason and written nowhere.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from patchgym_envs.bundled.template import cache_home
from patchgym_envs.converters.swebench_eval import eval_script
from patchgym_envs.localbuild.cluster import NodeRuntime
from patchgym_envs.localbuild.envs import EnvBuilder, EnvInfo, disk_usage
from patchgym_envs.localbuild.errors import BuildFailed, Unbuildable
from patchgym_envs.localbuild.probe import without_network_tests
from patchgym_envs.localbuild.repos import RepoCache
from patchgym_envs.localbuild.specs import EnvSpec, buildable, load_specs
from patchgym_envs.rowpaths import mark_root
from patchgym_envs.task import Task

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def default_cache() -> Path:
    return cache_home() / "localbuild"


class LocalBuildConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    out: Path
    """Templates and ``tasks.jsonl`` go here."""
    cache_dir: Path = Field(default_factory=default_cache)
    """Mirrors and environments, shared between builds."""
    mirrors: dict[str, str] = Field(default_factory=dict)
    """``owner/name`` -> git URL or local path (default: the GitHub URL)."""
    specs: Path | None = None
    """A JSON/YAML spec table laid over the harness's (same shape as harness_specs.json)."""
    python: str | None = None
    """Build every environment with this Python instead of the spec's."""
    network_tests: dict[str, list[str]] = Field(default_factory=dict)
    """Task id -> tests known to download data at test time (marked on the task)."""
    as_of: str | None = None
    """Resolve unpinned requirements as of this date for every row (default: each row's
    ``created_at`` day); ``"none"`` resolves to today's releases."""
    target: Literal["local", "docker", "k8s"] = "local"
    """``docker``: also build an offline image per row (``localbuild.images``); ``k8s``: and
    load it into the cluster node's runtime (``localbuild.cluster``)."""
    node_runtime: NodeRuntime = "containerd"
    """``k8s``: the kubelet's container runtime (``docker``: the images are already in it)."""
    allow_drop: int = Field(default=3, ge=0)
    """The most tests the network probe may drop from one row before the row is refused."""


class Outcome(BaseModel):
    id: str
    repo: str
    status: Literal["built", "unbuildable", "failed", "needs_network"]
    reason: str = ""
    env_key: str | None = None
    as_of: str | None = None
    env_shared: bool = False
    image: str | None = None
    """The row's offline Docker image (``--for docker``)."""
    template_bytes: int = 0
    env_bytes: int = 0
    build_s: float = 0.0
    network_tests: dict[str, str] = Field(default_factory=dict)
    """Tests dropped as network-bound -> the line of their own failure that shows it."""
    gate: str = ""
    """The parity gate's result (``--probe``): gold passes every kept test, empty fails
    every FAIL_TO_PASS, or why not."""


class BuildReport(BaseModel):
    outcomes: list[Outcome] = Field(default_factory=list)
    tasks: list[Task] = Field(default_factory=list)
    envs: dict[str, EnvInfo] = Field(default_factory=dict)

    @property
    def built(self) -> int:
        return sum(o.status == "built" for o in self.outcomes)

    def summary(self) -> str:
        n = len(self.outcomes)
        envs = {o.env_key for o in self.outcomes if o.env_key}
        return (
            f"{self.built} of {n} rows can run locally ({len(envs)} environments); "
            f"{sum(o.status == 'unbuildable' for o in self.outcomes)} unbuildable, "
            f"{sum(o.status == 'failed' for o in self.outcomes)} failed, "
            f"{sum(o.status == 'needs_network' for o in self.outcomes)} need the network"
        )


def resolution_date(task: Task, override: str | None) -> str | None:
    """The instant unpinned requirements resolve at: the override, else the start of the
    row's ``created_at`` day (UTC) so rows of one day share an environment."""
    if override is not None:
        return None if override.lower() == "none" else override
    if not task.created_at:
        return None
    try:
        when = datetime.fromisoformat(task.created_at.replace("Z", "+00:00"))
    except ValueError:
        raise Unbuildable(
            f"created_at {task.created_at!r} is not an ISO date (give --as-of)"
        ) from None
    when = when.astimezone(UTC) if when.tzinfo else when
    return when.strftime("%Y-%m-%dT00:00:00Z")


def local_task(task: Task, spec: EnvSpec, env: EnvInfo, template: Path) -> Task:
    paths = [*task.test_files, *task.new_test_files]
    script = eval_script(task.repo, paths, test_cmd=spec.test_command, activate=False)
    metadata = {
        **task.metadata,
        "local_env": {
            "key": env.key,
            "path": env.path,
            "base_prefix": env.base_prefix,
            "as_of": env.as_of,
        },
    }
    return task.model_copy(
        update={
            "template": str(template),
            "env": {
                **{k: v for k, v in task.env.items() if k != "PATH"},
                "PATH": f"{env.path}/bin:{SYSTEM_PATH}",
                "VIRTUAL_ENV": env.path,
                "PYTHONNOUSERSITE": "1",
            },
            "eval_script": "\n".join([*spec.eval_commands, script.rstrip("\n")]) + "\n",
            "metadata": metadata,
        }
    )


class LocalBuilder:
    def __init__(self, cfg: LocalBuildConfig) -> None:
        self.cfg = cfg
        for root in (cfg.out, cfg.cache_dir):  # rows built here may name paths beneath
            mark_root(root)
        self.table = load_specs(cfg.specs)
        self.repos = RepoCache(cfg.cache_dir, cfg.mirrors)
        self.envs = EnvBuilder(cfg.cache_dir, python_override=cfg.python)
        self.seen_envs: dict[str, EnvInfo] = {}

    def spec_for(self, task: Task) -> EnvSpec:
        spec = self.table.lookup(task.repo, task.version)
        if spec is None:
            raise Unbuildable(
                f"no install spec for {task.repo} version {task.version!r} "
                f"(give one with --specs FILE; table: {self.table.source})"
            )
        reason = buildable(spec)
        if reason:
            raise Unbuildable(reason)
        self.envs.python_for(spec)  # raises Unbuildable when the interpreter is missing
        return spec

    def build_one(self, task: Task) -> tuple[Outcome, Task | None]:
        t0 = time.monotonic()
        out = Outcome(id=task.id, repo=task.repo, status="built")
        try:
            if not task.base_commit:
                raise Unbuildable("the row has no base_commit")
            spec = self.spec_for(task)
            template = self.repos.checkout(
                task.repo, task.base_commit, self.cfg.out / "templates" / task.id
            )
            as_of = resolution_date(task, self.cfg.as_of)
            out.env_shared = self.envs.get(self.envs.key(spec, task.repo, as_of)) is not None
            env = self.envs.build(spec, task.repo, template, task.workdir, as_of)
            self.seen_envs[env.key] = env
        except Unbuildable as exc:
            return out.model_copy(update={"status": "unbuildable", "reason": str(exc)}), None
        except BuildFailed as exc:
            return out.model_copy(update={"status": "failed", "reason": str(exc)}), None
        declared = {t: "declared in config" for t in self.cfg.network_tests.get(task.id, [])}
        built = without_network_tests(local_task(task, spec, env, template), declared)
        out.network_tests = declared
        out.env_key = env.key
        out.as_of = env.as_of
        out.env_bytes = env.disk_bytes
        out.template_bytes = disk_usage(template)
        out.build_s = round(time.monotonic() - t0, 2)
        return out, built

    def build(
        self, tasks: Iterable[Task], progress: Callable[[Outcome], None] | None = None
    ) -> BuildReport:
        report = BuildReport()
        for task in tasks:
            outcome, built = self.build_one(task)
            report.outcomes.append(outcome)
            if built is not None:
                report.tasks.append(built)
            if progress is not None:
                progress(outcome)
        report.envs.update(self.seen_envs)
        return report
