"""rLLM adapters (importable only where rLLM is installed; rLLM is not on PyPI).

    pip install "rllm @ git+https://github.com/rllm-org/rllm@9beb6e0f676a46d38858991fd79ac5f8e0b16d4c"   # current (Workflow API)
    pip install "rllm @ git+https://github.com/rllm-org/rllm@v0.2.1.post1"                                    # v0.2.x (AgentTrainer + env/agent classes)

- :mod:`.sandbox_adapter` — our :class:`~patchgym_sandbox.Sandbox` behind rLLM's
  ``Sandbox`` protocol (no rLLM import needed; structural typing);
- :mod:`.env_agent` — ``PatchgymSWEEnv`` / ``PatchgymSWEAgent`` as rLLM ``BaseEnv`` /
  ``BaseAgent`` subclasses (same module paths in v0.2.x and current rLLM);
- :mod:`.workflow` — ``PatchgymSWEWorkflow`` and ``PatchgymMultiTurnWorkflow``, current-rLLM
  workflows whose episode is the shared driver's (graded at a cutoff, sandbox closed);
- :mod:`.train_v02` — the v0.2.x training script with the seed recipe's overrides.
"""

from __future__ import annotations

from patchgym_trainer.errors import MissingExtra

RLLM_REF = "9beb6e0f676a46d38858991fd79ac5f8e0b16d4c"
RLLM_V02_REF = "v0.2.1.post1"
RLLM_INSTALL = f'pip install "rllm @ git+https://github.com/rllm-org/rllm@{RLLM_REF}"'


def require_rllm() -> None:
    """Raise :class:`MissingExtra` with the install line when rLLM is absent."""
    try:
        import rllm  # noqa: F401
    except ImportError as exc:
        raise MissingExtra(
            f"rLLM is not installed (it is not on PyPI): {RLLM_INSTALL} "
            f"(or @{RLLM_V02_REF} for the v0.2.x AgentTrainer)"
        ) from exc
