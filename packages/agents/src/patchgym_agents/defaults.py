"""The agents' defaults, each stated once (the trainer's schema reads them from here).

``None`` for any of these settings, anywhere down the call chain (a CLI flag, a keyword
argument, the trainer's config), means "this default".
"""

from __future__ import annotations

MODEL_TIMEOUT_S = 600.0
"""Deadline of one model call: ``RolloutConfig.model_timeout_s``, ``OpenAIPolicy``'s client
timeout, the trainer's ``rollout.model_timeout_s``."""

TEMPERATURE = 1.0
"""Sampling temperature (``Sampling.temperature``, the trainer's ``rollout.temperature``):
1.0 samples the policy the trainer optimises."""

CONCURRENCY = 4
"""Most episodes (so sandboxes) at once: ``RolloutConfig.concurrency``, the trainer's
``validate.concurrency`` and ``rollout.concurrency``."""

MODEL_RETRIES = 5
"""Retries of one model call on a transient error (``OpenAIPolicy(max_retries=...)``, the
trainer's ``rollout.retries``)."""

INFRA_RETRIES = 2
"""Reruns of an episode that ended in an infrastructure failure (``RolloutConfig.infra_retries``,
the trainer's ``rollout.infra_retries``)."""
