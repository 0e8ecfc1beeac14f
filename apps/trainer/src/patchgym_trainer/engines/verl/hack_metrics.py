"""Per-training-step ``hack/<flag>`` and ``hack/any`` for verl (no verl import here).

Our agent loop puts each episode's hack fields and ``reward_valid`` into the sample's
``extra_fields`` (:mod:`.agent_loop`). verl 0.9.1's default trainer (``trainer.use_v1``,
``PPOTrainerSync``) keeps every sample in its TransferQueue and logs a fixed set of
fields per step, none of them ours. The one hook it documents whose returned metrics it
logs per step is the replay-buffer sampler (``trainer.v1.sampler.custom_sampler``: the
``sample`` method returns ``(batch, metrics)``, merged into the step's metrics); ours is
:mod:`.replay_buffer`. This module holds the metric (:func:`step_hack_metrics`, a plain
function of the sampled batch's ``extra_fields``) and the overrides that select it.

verl passes a custom sampler none of the settings of its own group filters (DAPO
``algorithm.filter_groups``, ``sync_refill_failed_groups``), and the legacy trainer
(``trainer.use_v1=false``) has no sampler: with those, or with a sampler of the user's own,
:func:`hack_metrics_off` says why the metrics are off and the launcher leaves verl's
sampler in place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from patchgym_agents.driver import HACK_ANY, HACK_PREFIX, hack_metrics

VERL_SERIES = "0.9."
"""The verl releases whose V1 ``ReplayBuffer`` :mod:`.replay_buffer` extends (0.9.1 pinned)."""

SAMPLER_PATH = "pkg://patchgym_trainer.engines.verl.replay_buffer"
SAMPLERS = {
    "sync": "HackMetricsReplayBuffer",
    "colocate_async": "HackMetricsReplayBufferAsync",
    "separate_async": "HackMetricsReplayBufferAsync",
}
"""``trainer.v1.trainer_mode`` -> our sampler (verl: ``ReplayBuffer`` for sync, else async)."""


@dataclass(frozen=True)
class _Sample:
    """One sample's ``extra_fields`` as :func:`patchgym_agents.hack_metrics` reads it."""

    masked: bool
    hack_flags: Sequence[str]


def _sample(fields: Any) -> _Sample:
    fields = getattr(fields, "data", fields)  # TransferQueue may hand back NonTensorData
    if not isinstance(fields, Mapping):
        raise TypeError(
            f"a sample's extra_fields must be a mapping (our agent loop writes one), "
            f"got {type(fields).__name__}"
        )
    flags = [
        key.removeprefix(HACK_PREFIX)
        for key, value in fields.items()
        if isinstance(key, str) and key.startswith(HACK_PREFIX) and key != HACK_ANY and value
    ]
    return _Sample(masked=not fields.get("reward_valid", True), hack_flags=flags)


def step_hack_metrics(extra_fields: Iterable[Any]) -> dict[str, float]:
    """``hack/<flag>`` and ``hack/any`` over one training batch, from each sample's
    ``extra_fields``: the share of graded samples (``reward_valid``) carrying the flag,
    exactly :func:`patchgym_agents.hack_metrics` (the rates TRL logs per step)."""
    return hack_metrics(_sample(f) for f in extra_fields)


def check_verl_version(version: str) -> None:
    """Raise when verl is not a release :mod:`.replay_buffer` was written against."""
    if not version.startswith(VERL_SERIES):
        from patchgym_trainer.errors import MissingExtra

        raise MissingExtra(
            f"verl {version} is installed; patchgym's per-step hack/* metrics extend verl "
            f"{VERL_SERIES}x's V1 ReplayBuffer (patchgym-trainer pins verl==0.9.1): "
            "uv sync --package patchgym-trainer --extra gpu --locked"
        )


def _key_value(override: str) -> tuple[str, str]:
    key, _, value = override.partition("=")
    return key.lstrip("+~"), value.strip().lower()


def hack_metrics_off(extra_overrides: Sequence[str]) -> str | None:
    """Why our sampler stays out of verl's config for these overrides (None: it goes in)."""
    mode = trainer_mode(extra_overrides)
    if mode not in SAMPLERS:
        return f"trainer.v1.trainer_mode={mode}: patchgym has a sampler for {', '.join(SAMPLERS)}"
    for override in extra_overrides:
        key, value = _key_value(override)
        if key == "trainer.use_v1" and value == "false":
            return "trainer.use_v1=false: verl's legacy trainer has no sampler hook"
        if key.startswith("trainer.v1.sampler.custom_sampler"):
            return f"{key} is set: your own sampler replaces ours"
        if key == "algorithm.filter_groups.enable" and value == "true":
            return (
                "algorithm.filter_groups.enable=true: verl passes a custom sampler no DAPO settings"
            )
        if key == "trainer.v1.sampler.sync_refill_failed_groups" and value == "true":
            return "sync_refill_failed_groups=true: verl passes a custom sampler no refill settings"
    return None


def trainer_mode(extra_overrides: Sequence[str]) -> str:
    """``trainer.v1.trainer_mode`` after the overrides (verl's default: ``sync``)."""
    mode = "sync"
    for override in extra_overrides:
        if _key_value(override)[0] == "trainer.v1.trainer_mode":
            mode = override.partition("=")[2].strip()
    return mode


def sampler_overrides(extra_overrides: Sequence[str]) -> list[str]:
    """verl overrides that make its trainer sample through our hack-metrics sampler."""
    if hack_metrics_off(extra_overrides) is not None:
        return []
    return [
        f"trainer.v1.sampler.custom_sampler.path={SAMPLER_PATH}",
        f"trainer.v1.sampler.custom_sampler.name={SAMPLERS[trainer_mode(extra_overrides)]}",
    ]
