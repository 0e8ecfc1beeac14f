"""Per-training-step ``hack/*`` metrics under verl 0.9.1's V1 trainer, on CPU.

The samples are real: our verl agent loop runs three scripted episodes on a bundled task
in local sandboxes (resolved, a ``git_outside_head`` attempt, an infrastructure failure),
graded by the real grader. Their outputs are stored the way verl's ``AgentLoopWorkerTQ``
stores them (``as_dict`` -> ``list_of_dict_to_tensordict``), in a real TransferQueue on a
local Ray, and sampled by the replay buffer verl itself builds from our overrides
(``PPOTrainer._build_replay_buffer`` on the composed ``ppo_trainer`` config). No GPU step
runs here: that the trainer then logs the sampler's metrics is verl's code
(``_step_once`` -> ``step`` -> ``fit``), read, not run.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import require

pytestmark = require("verl", "cpu")

EXPECTED = {"hack/git_outside_head": 0.5, "hack/any": 0.5}
"""Two graded samples (one flagged); the infrastructure failure is not counted."""


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    from test_episode_adapters import SCENARIOS, script_tokenizer, verl_output

    from patchgym_envs import bundled_task

    tokenizer = script_tokenizer()
    by_name = {sc.name: sc for sc in SCENARIOS}

    async def run_all() -> list[Any]:
        outs = []
        for name in ("submit_resolved", "git_outside_head", "infra_at_step"):
            sc, tmp = by_name[name], tmp_path_factory.mktemp(name)
            outs.append(await verl_output(sc, bundled_task(sc.task), tmp, tokenizer))
        return outs

    return asyncio.run(run_all())


def stored_extra_fields(outputs: list[Any]) -> list[Any]:
    """The samples' ``extra_fields`` after verl's own conversion for the TransferQueue."""
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    return list(list_of_dict_to_tensordict([o.as_dict() for o in outputs])["extra_fields"])


def test_step_metrics_of_real_samples(outputs: list[Any]) -> None:
    from patchgym_agents.driver import hack_metrics
    from patchgym_trainer.engines.verl.hack_metrics import step_hack_metrics

    assert [o.extra_fields["reward_valid"] for o in outputs] == [True, True, False]
    metrics = step_hack_metrics(stored_extra_fields(outputs))
    assert set(metrics) == set(hack_metrics([]))  # every flag, every step (TRL's keys)
    assert {k: v for k, v in metrics.items() if v} == EXPECTED
    assert step_hack_metrics([]) == hack_metrics([])  # nothing graded: all 0.0
    with pytest.raises(TypeError, match="extra_fields must be a mapping"):
        step_hack_metrics(["hack/any"])


def test_overrides_toggle_the_sampler() -> None:
    from patchgym_trainer.engines.verl.hack_metrics import hack_metrics_off, sampler_overrides

    assert sampler_overrides([])[1].endswith("=HackMetricsReplayBuffer")
    mode = ["+trainer.v1.trainer_mode=separate_async"]
    assert sampler_overrides(mode)[1].endswith("=HackMetricsReplayBufferAsync")
    for override, why in [
        ("trainer.use_v1=False", "legacy trainer"),
        ("trainer.v1.sampler.custom_sampler.name=Mine", "your own sampler"),
        ("algorithm.filter_groups.enable=true", "DAPO"),
        ("trainer.v1.sampler.sync_refill_failed_groups=true", "refill"),
        ("trainer.v1.trainer_mode=mine", "has a sampler for sync"),
    ]:
        assert why in (hack_metrics_off([override]) or ""), override
        assert sampler_overrides([override]) == []
    assert hack_metrics_off(["algorithm.filter_groups.enable=false"]) is None


def build_replay_buffer(tmp_path: Path, *extra: str) -> Any:
    """The replay buffer verl's trainer builds from our overrides for ``preset=smoke``."""
    import verl
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from verl.trainer.ppo.v1 import PPOTrainer

    from patchgym_trainer.compose import compose as pg_compose
    from patchgym_trainer.engines.verl.launch import prepare_files, verl_overrides

    extra_overrides = "train.extra_overrides=[" + ",".join(f"'{o}'" for o in extra) + "]"
    cfg = pg_compose(["preset=smoke", "dataset=bundled", "val_dataset=null", extra_overrides])
    overrides = verl_overrides(cfg, prepare_files(cfg, tmp_path))
    GlobalHydra.instance().clear()
    conf = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(conf), version_base=None):
        vc = compose(config_name="ppo_trainer", overrides=overrides)
    trainer = SimpleNamespace(  # what _build_replay_buffer reads of its trainer
        config=vc, trainer_mode=vc.trainer.v1.trainer_mode, _add_prompts_to_generate=len
    )
    return PPOTrainer._build_replay_buffer(trainer)


def test_verl_builds_our_sampler_from_our_overrides(tmp_path: Path) -> None:
    from verl.trainer.ppo.v1.replay_buffer import ReplayBufferAsync

    from patchgym_trainer.engines.verl.replay_buffer import (
        HackMetricsReplayBuffer,
        HackMetricsReplayBufferAsync,
    )

    assert type(build_replay_buffer(tmp_path / "sync")) is HackMetricsReplayBuffer
    buf = build_replay_buffer(tmp_path / "async", "trainer.v1.trainer_mode=colocate_async")
    assert type(buf) is HackMetricsReplayBufferAsync and isinstance(buf, ReplayBufferAsync)
    # named by hand for the wrong mode: the constructor says which one verl needs
    kwargs = {"trainer_config": {}, "max_off_policy_threshold": 8, "sampler_kwargs": {}}
    with pytest.raises(ValueError, match=r"custom_sampler\.name=HackMetricsReplayBufferAsync"):
        HackMetricsReplayBuffer(
            trainer_mode="colocate_async", max_off_policy_strategy="drop", **kwargs
        )
    with pytest.raises(ValueError, match=r"custom_sampler\.name=HackMetricsReplayBuffer$"):
        HackMetricsReplayBufferAsync(trainer_mode="sync", max_off_policy_strategy="drop", **kwargs)


@pytest.fixture(scope="module")
def transfer_queue() -> Iterator[Any]:
    """A real TransferQueue (controller + one storage unit) on a private local Ray."""
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    temp_dir = tempfile.mkdtemp(prefix="ray")  # under TMPDIR: short socket paths
    ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=temp_dir)
    try:
        tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
        yield tq
        tq.close()
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)


def store(tq: Any, outputs: list[Any], partition_id: str, uid: str) -> None:
    """What verl's ``AgentLoopWorkerTQ`` writes: one finished prompt, one key per sample."""
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    tq.kv_put(
        key=uid,
        partition_id=partition_id,
        tag={"is_prompt": True, "global_steps": 1, "status": "finished"},
    )
    fields = [{**o.as_dict(), "uid": uid, "session_id": i} for i, o in enumerate(outputs)]
    tq.kv_batch_put(
        keys=[f"{uid}_{i}_0" for i in range(len(outputs))],
        partition_id=partition_id,
        fields=list_of_dict_to_tensordict(fields),
        tags=[{"status": "success", "global_steps": 1} for _ in outputs],
    )


def test_sampled_training_batch_reports_hack_rates(
    transfer_queue: Any, outputs: list[Any], tmp_path: Path
) -> None:
    from patchgym_agents.driver import hack_metrics

    buf = build_replay_buffer(tmp_path)
    store(transfer_queue, outputs, "train", "u1")
    batch, metrics = buf.sample(global_steps=1, partition_id="train", batch_size=1)
    assert sorted(batch.keys) == ["u1_0_0", "u1_1_0", "u1_2_0"]
    assert {k: v for k, v in metrics.items() if k.startswith("hack/") and v} == EXPECTED
    assert {k for k in metrics if k.startswith("hack/")} == set(hack_metrics([]))

    store(transfer_queue, outputs, "val", "v1")
    _, val_metrics = buf.sample(global_steps=1, partition_id="val", batch_size=1)
    assert not [k for k in val_metrics if k.startswith("hack/")]  # verl logs val-aux itself
