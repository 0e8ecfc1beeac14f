"""The typed shape of a composed config (what Hydra's YAML must validate into).

Hydra composes the groups; pydantic then checks every key, so a typo or a bad value is
an error that names the key and the allowed values (see :mod:`patchgym_trainer.compose`).

Every default is stated here once (or in the package that owns the setting:
:mod:`patchgym_agents.defaults`, ``patchgym_envs.EnvConfig``); ``conf/config.yaml`` lists
the keys with ``null``, which means "the default" (``test_config_defaults`` holds it so).
The ``sandbox`` node is validated here, once, into the installed backend's own config
class (the sandbox registry's two-step validation), and ``env`` is the envs package's
``EnvConfig`` itself: one object, holding that sandbox and the agent's scaffold, goes to
every command (validate, rollout, the verl loop, the rLLM adapters).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    field_validator,
    model_validator,
)

from patchgym_agents.defaults import (
    CONCURRENCY,
    INFRA_RETRIES,
    MODEL_RETRIES,
    MODEL_TIMEOUT_S,
    TEMPERATURE,
)
from patchgym_envs import EnvConfig
from patchgym_sandbox import BackendConfig
from patchgym_sandbox.registry import load_config


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _null_is_default(cls, value: Any) -> Any:
        """``null`` (as ``conf/config.yaml`` writes every key) means the field's default."""
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if v is not None}
        return value


class RunConfig(_Strict):
    name: str = "patchgym"
    output_dir: str = "patchgym-runs"
    """Reports, trajectories and converted datasets go under ``<output_dir>/<run id>``
    (``<command>-<time>-<hex>``, the id that labels the run's sandboxes)."""
    seed: int = 0
    executor: Literal["local", "ray"] = "local"
    """Where validate / rollout episodes run: this process, or a Ray cluster (``ray.*``)."""
    trace_jsonl: str | None = None
    """Write phase spans (create, tool calls, generation, grading, close) to this JSONL file."""
    trace_otlp: str | None = None
    """Export phase spans to this OTLP/HTTP endpoint (``http://host:4318/v1/traces``)."""


class RayConfig(_Strict):
    address: str | None = None
    """``auto``, ``host:port`` or ``ray://host:10001``; None starts a local Ray."""
    num_cpus_per_episode: float = Field(default=0.5, gt=0)
    """CPUs Ray reserves per episode task (bounds episodes per node)."""


DatasetFormat = Literal[
    "auto", "bundled", "task", "r2egym", "swebench", "swebench_r2e", "swesmith", "swegym"
]


class DatasetConfig(_Strict):
    name: str
    source: str
    """``bundled``, ``file`` (read ``path``) or a Hugging Face hub id."""
    path: str | None = None
    """Local copy (JSONL, parquet or a ``save_to_disk`` folder); wins over a hub id."""
    format: DatasetFormat = "auto"
    split: str = "train"
    limit: int | None = Field(default=None, gt=0)
    sort_by_image: bool = False
    strict: bool = True
    """Strict: a bad row is an error naming the row; lenient: skipped and reported."""

    @model_validator(mode="after")
    def _needs_path(self) -> DatasetConfig:
        if self.source == "file" and not self.path:
            raise ValueError("dataset=file needs dataset.path=<JSONL, parquet or folder>")
        return self


class AgentConfig(_Strict):
    name: str
    scaffold: Literal["r2egym", "sweagent", "debug-gym", "graph-planner"]
    tool_format: Literal["text", "native"] = "text"
    """``text``: ``<function=...>`` blocks in the reply; ``native``: OpenAI tool calls."""
    max_context_tokens: int = Field(default=32_768, gt=0)


class AlgorithmConfig(_Strict):
    name: Literal["grpo", "rloo", "ppo"]
    adv_estimator: Literal["grpo", "rloo", "gae", "reinforce_plus_plus", "remax"]
    use_kl_loss: bool = True
    kl_coef: float = Field(default=0.001, ge=0)
    kl_loss_type: str = "low_var_kl"
    entropy_coeff: float = 0.0
    lr: float = Field(default=1e-6, gt=0)
    use_critic: bool = False


class ModelConfig(_Strict):
    name: str
    path: str
    """Hugging Face hub id or a local folder with ``config.json``."""
    enable_gradient_checkpointing: bool = True
    use_remove_padding: bool = True


PatchKind = Literal["gold", "empty"]
Tracker = Literal["console", "mlflow", "wandb", "tensorboard"]


def _both_patches() -> list[PatchKind]:
    return ["gold", "empty"]


def _console() -> list[Tracker]:
    return ["console"]


class ValidateSettings(_Strict):
    concurrency: int = Field(default=CONCURRENCY, gt=0)
    patches: list[PatchKind] = Field(default_factory=_both_patches)
    report: bool = True


class RolloutSettings(_Strict):
    policy: Literal["openai", "gold", "empty", "rules"] = "openai"
    """``openai``: the model behind ``base_url``; ``gold`` / ``empty``: the task's gold patch
    (or none) applied through the scaffold's tools, to check the pipeline without a model;
    ``rules``: graph-planner's rule-based planner, no model (needs ``agent=graph_planner``)."""
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str | None = None
    """Served model name; None asks the endpoint (``GET /models``) for its first model."""
    api_key_env: str = "OPENAI_API_KEY"
    samples: int = Field(default=1, gt=0)
    """K: samples per task (pass@k is reported for k = 1..K)."""
    concurrency: int = Field(default=CONCURRENCY, gt=0)
    temperature: float = Field(default=TEMPERATURE, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    """Nucleus sampling; None: the server's default."""
    max_tokens: int = Field(default=2048, gt=0)
    tool_format: Literal["text", "native"] | None = None
    """None: the agent group's ``tool_format``."""
    model_timeout_s: float = Field(default=MODEL_TIMEOUT_S, gt=0)
    """Deadline of one model call (the client's timeout and the episode's per-call limit)."""
    retries: int = Field(default=MODEL_RETRIES, ge=0)
    """Retries of one model call on a transient error (rate limit, 5xx, timeout)."""
    infra_retries: int = Field(default=INFRA_RETRIES, ge=0)
    """Reruns of an episode that ended in an infrastructure failure (masked, never scored)."""
    resume: bool = True
    """Skip episodes already in the output folder's trajectories.jsonl (false: redo them)."""


class TrainSettings(_Strict):
    engine: Literal["verl", "rllm", "trl"] = "verl"
    """``verl`` (GPU nodes), ``rllm`` (its own script), ``trl`` (TRL's GRPOTrainer; runs on CPU)."""
    nodes: int = Field(default=1, gt=0)
    gpus_per_node: int = Field(default=1, gt=0)
    train_batch_size: int = Field(default=4, gt=0)
    rollout_n: int = Field(default=4, gt=0)
    ppo_mini_batch_size: int = Field(default=4, gt=0)
    ppo_micro_batch_size_per_gpu: int = Field(default=1, gt=0)
    ppo_max_token_len_per_gpu: int = Field(default=40_960, gt=0)
    max_prompt_length: int = Field(default=4096, gt=0)
    max_response_length: int = Field(default=32_768, gt=0)
    total_epochs: int = Field(default=1, gt=0)
    total_training_steps: int | None = Field(default=None, gt=0)
    gpu_memory_utilization: float = Field(default=0.5, gt=0, le=1)
    tensor_model_parallel_size: int = Field(default=1, gt=0)
    rollout_engine: Literal["vllm", "sglang"] = "vllm"
    agent_loop: str = "patchgym_swe"
    val_before_train: bool = False
    test_freq: int = -1
    save_freq: int = -1
    logger: list[Tracker] = Field(default_factory=_console)
    project_name: str = "patchgym"
    expected_episode_s: float = Field(default=300.0, gt=0)
    """Typical episode wall time, for the sandbox-hours estimate in preflight."""
    extra_overrides: list[str] = Field(default_factory=list)
    """Raw verl overrides appended last (``actor_rollout_ref.actor.clip_ratio_high=0.28``)."""
    max_new_tokens_per_turn: int = Field(default=1024, gt=0)
    """engine=trl: tokens the model may write per agent turn (``max_response_length`` caps the episode)."""
    force_gold_samples: int = Field(default=0, ge=0)
    """engine=trl, a smoke-test device only: this many samples per group act with the gold
    patch instead of the model, so a random model's group advantage is non-zero."""
    static_cache: bool = False
    """engine=trl: decode each turn's batch into one static KV cache (the step's episodes x
    max prompt + max response + one turn), so that on a GPU ``transformers`` compiles the
    decode step once instead of launching every kernel of it (see ``engines/trl/generate.py``).
    Costs that cache's memory up front and one compile per process (the first step); on an
    H200 the compiled rollout generated 6x the dynamic cache's tokens/s. Off by default (on
    CPU it is slower: no compile); ``preset=gpu_qwen05b`` turns it on."""


class AppConfig(_Strict):
    """One composed ``patchgym`` config."""

    run: RunConfig = Field(default_factory=RunConfig)
    sandbox: SerializeAsAny[BackendConfig]
    """The ``sandbox=<backend>`` group, as the backend's own config class."""
    dataset: DatasetConfig
    val_dataset: DatasetConfig | None = None
    agent: AgentConfig
    algorithm: AlgorithmConfig
    model: ModelConfig
    env: EnvConfig = Field(default_factory=EnvConfig)
    """Episode settings; ``env.sandbox`` is ``sandbox`` and ``env.scaffold`` is ``agent.scaffold``."""
    validate_: ValidateSettings = Field(default_factory=ValidateSettings, alias="validate")
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    train: TrainSettings = Field(default_factory=TrainSettings)
    ray: RayConfig = Field(default_factory=RayConfig)
    preset: Any = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_validator("sandbox", mode="before")
    @classmethod
    def _backend_config(cls, value: Any) -> BackendConfig:
        return load_config(value)

    @field_validator("env", mode="before")
    @classmethod
    def _env_defaults(cls, value: Any) -> Any:
        """``null`` in the YAML ``env`` node means: EnvConfig's own default."""
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if v is not None}
        return value

    @model_validator(mode="after")
    def _one_env(self) -> AppConfig:
        self.env = self.env.model_copy(
            update={"sandbox": self.sandbox, "scaffold": self.agent.scaffold}
        )
        return self

    def env_node(self) -> dict[str, Any]:
        """``env`` as plain data, for a process that validates it again (verl's agent loop
        reads it from a YAML file); secrets in the sandbox node are kept, not masked."""
        return {
            **self.env.model_dump(mode="json", exclude={"sandbox"}),
            "sandbox": self.sandbox.node(),
        }
