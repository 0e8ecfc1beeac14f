"""What a rollout run is: backend, scaffold, samples, limits, output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from patchgym_agents.scaffolds import ToolFormat


class RolloutConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sandbox: dict[str, Any] = Field(default_factory=lambda: {"type": "local"})
    """Backend config for ``patchgym_sandbox.create_backend`` (ignored when a backend is passed)."""
    scaffold: str = "r2egym"
    tool_format: ToolFormat | None = None
    """None: the scaffold's default (``text`` for r2egym / debug-gym, ``native`` for sweagent)."""
    samples: int = Field(default=1, ge=1)
    """K samples per task."""
    concurrency: int = Field(default=8, ge=1)
    """Most episodes (so sandboxes) at once."""
    max_steps: int = Field(default=40, gt=0)
    episode_timeout_s: float = Field(default=1800.0, gt=0)
    """Wall-clock budget of one episode (sandbox creation to grading)."""
    step_timeout_s: float = Field(default=120.0, gt=0)
    """Deadline of one tool command in the sandbox."""
    model_timeout_s: float = Field(default=600.0, gt=0)
    """Deadline of one policy call."""
    infra_retries: int = Field(default=2, ge=0)
    """Extra attempts for an episode that failed on infrastructure."""
    retry_backoff_s: float = Field(default=2.0, gt=0)
    """First backoff of an infra retry (full jitter, doubling, capped at 60x)."""
    max_context_tokens: int | None = Field(default=None, gt=0)
    output_dir: Path = Path("rollouts")
    run_id: str | None = None
    """Labels every sandbox of the run (for reaping); default: derived from output_dir."""
    resume: bool = True
    """Skip episodes already graded in ``output_dir``'s JSONL."""
    progress: bool = True
    env_args: dict[str, Any] = Field(default_factory=dict)
    """Further ``patchgym_envs.EnvConfig`` fields (``python``, ``blocked_commands``, ...)."""
