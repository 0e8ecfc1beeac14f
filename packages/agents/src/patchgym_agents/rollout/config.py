"""What a rollout run is: backend, scaffold, samples, limits, output."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from patchgym_agents.defaults import CONCURRENCY, INFRA_RETRIES, MODEL_TIMEOUT_S
from patchgym_agents.envs_api import EnvConfig
from patchgym_agents.scaffolds import ToolFormat


class RolloutConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env: EnvConfig = Field(default_factory=EnvConfig)
    """Episode settings (sandbox, scaffold, limits): every episode of the run gets this object.
    Its ``sandbox`` builds the run's backend unless one is passed to ``rollout``; its
    ``run_id`` labels every sandbox of the run (default: derived from ``output_dir``)."""
    tool_format: ToolFormat | None = None
    """None: the scaffold's default (``text`` for r2egym / debug-gym, ``native`` for sweagent)."""
    samples: int = Field(default=1, ge=1)
    """K samples per task."""
    sandbox_groups: bool = True
    """Make the sandboxes of a task's samples as one group (``backend.create_group``)."""
    concurrency: int = Field(default=CONCURRENCY, ge=1)
    """Most episodes (so sandboxes) at once (the trainer's ``validate.concurrency`` and
    ``rollout.concurrency`` default to this)."""
    model_timeout_s: float = Field(default=MODEL_TIMEOUT_S, gt=0)
    """Deadline of one policy call."""
    infra_retries: int = Field(default=INFRA_RETRIES, ge=0)
    """Extra attempts for an episode that failed on infrastructure."""
    retry_backoff_s: float = Field(default=2.0, gt=0)
    """First backoff of an infra retry (full jitter, doubling, capped at 60x)."""
    max_context_tokens: int | None = Field(default=None, gt=0)
    output_dir: Path = Path("rollouts")
    resume: bool = True
    """Skip episodes already graded in ``output_dir``'s JSONL."""
    progress: bool = True
