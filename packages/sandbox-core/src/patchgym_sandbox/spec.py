"""What a sandbox should be: image or template, workdir, env, resources, labels, lease."""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict, Field

from patchgym_sandbox import labels as L
from patchgym_sandbox.output import DEFAULT_MAX_OUTPUT_BYTES


class Resources(BaseModel):
    """Limits; a backend applies what it can and documents what it ignores."""

    model_config = ConfigDict(extra="forbid")

    memory_mb: int | None = Field(default=None, gt=0)
    cpus: float | None = Field(default=None, gt=0)
    pids: int | None = Field(default=None, gt=0)
    cpu_time_s: int | None = Field(default=None, gt=0)
    disk_mb: int | None = Field(default=None, gt=0)


class SandboxSpec(BaseModel):
    """Everything needed to provision one sandbox. Mutable until the sandbox starts."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    image: str | None = None
    """Container image (docker, k8s, ags custom image)."""
    template: str | None = None
    """Local template directory (local backend) or cloud template / tool name (e2b, ags)."""
    workdir: str = "/testbed"
    """Where the repository lives inside the sandbox; relative paths resolve against it."""
    env: dict[str, str] = Field(default_factory=dict)
    resources: Resources = Field(default_factory=Resources)
    labels: dict[str, str] = Field(default_factory=dict)
    run_id: str | None = None
    rollout_id: str | None = None
    lease_s: float = Field(default=L.DEFAULT_LEASE_S, gt=0)
    """Time to live: after this the sandbox is fair game for ``reap(expired=True)``.
    Renewed by use (each ``exec`` past half the lease) on backends that can move it."""
    network: bool = False
    mounts: list[str] = Field(default_factory=list)
    """Host folders visible read-only at the same path inside the sandbox (local backend:
    a task's prebuilt environment and its interpreter). Other backends ignore it."""
    user: str | None = None
    start_script: str | None = None
    """POSIX sh run once in each new sandbox before it is handed out (as the sandbox's user,
    with the spec's env): a derivation the backend could not keep as an image (see
    ``SandboxBackend.derive_image``), e.g. an image's ``.git`` reduced to its base commit
    on k8s. A non-zero exit fails the start with ``DeriveFailed``."""
    max_output_bytes: int = Field(default=DEFAULT_MAX_OUTPUT_BYTES, ge=1024)
    """Per-stream cap for ``exec`` output; head and tail are kept."""

    def all_labels(self, sandbox_id: str, *, now: float | None = None) -> dict[str, str]:
        """User labels plus the ones every backend stamps for reaping."""
        out = dict(self.labels)
        out[L.MANAGED] = "true"
        out[L.SANDBOX_ID] = sandbox_id
        out[L.EXPIRES_AT] = str(L.expires_at(self.lease_s, now))
        out[L.CREATED_AT] = str(int(time.time() if now is None else now))
        out.setdefault(L.OWNER, L.owner())
        out[L.RUN_ID] = self.run_id if self.run_id is not None else L.default_run_id()
        out[L.ROLLOUT_ID] = self.rollout_id if self.rollout_id is not None else sandbox_id
        return out
