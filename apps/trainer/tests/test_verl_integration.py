"""What verl itself reads: our parquet through RLHFDataset, our overrides through its YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import require

from patchgym_trainer.cli import main

pytestmark = require("verl", "cpu")


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from patchgym_envs import bundled_tasks
    from patchgym_trainer.testing.tiny_model import train_tokenizer

    return train_tokenizer([t.problem_statement for t in bundled_tasks()], vocab_size=600)


def convert(tmp_path: Path) -> Path:
    out = tmp_path / "bundled.parquet"
    with pytest.raises(SystemExit) as code:
        main(["datasets", "convert", "--out", str(out)])
    assert code.value.code == 0
    return out


def test_rlhf_dataset_reads_converted_parquet(tmp_path: Path, tokenizer: Any) -> None:
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from patchgym_envs import bundled_tasks
    from patchgym_trainer.engines.verl.agent_loop import task_from_extra_info

    path = convert(tmp_path)
    ds = RLHFDataset(
        data_files=[str(path)],
        tokenizer=tokenizer,
        config=OmegaConf.create(
            {
                "max_prompt_length": 4096,
                "return_raw_chat": True,
                "filter_overlong_prompts": False,
                "cache_dir": str(tmp_path / "cache"),
            }
        ),
    )
    tasks = bundled_tasks()
    assert len(ds) == len(tasks)
    for i, task in enumerate(tasks):
        row = ds[i]
        assert row["raw_prompt"][0]["content"] == task.problem_statement
        assert row["index"] == i
        assert row["data_source"] == "bundled"
        # the agent loop rebuilds exactly the task from what verl hands it
        assert task_from_extra_info(row["extra_info"]) == task


def test_overrides_compose_against_verls_own_config(tmp_path: Path) -> None:
    import verl
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from patchgym_trainer.compose import compose as pg_compose
    from patchgym_trainer.engines.verl.launch import prepare_files, verl_overrides

    conf = Path(verl.__file__).parent / "trainer" / "config"
    for preset in ("smoke", "ags_swebench"):
        cfg = pg_compose([f"preset={preset}", "dataset=bundled", "val_dataset=null"])
        files = prepare_files(cfg, tmp_path / preset)
        overrides = verl_overrides(cfg, files)
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(conf), version_base=None):
            vc = compose(config_name="ppo_trainer", overrides=overrides)
        r = vc.actor_rollout_ref.rollout
        assert r.agent.default_agent_loop == "patchgym_swe"
        assert r.n == cfg.train.rollout_n
        assert vc.algorithm.adv_estimator == cfg.algorithm.adv_estimator
        assert vc.trainer.n_gpus_per_node == cfg.train.gpus_per_node
        assert vc.data.train_batch_size == cfg.train.train_batch_size
        entries = __import__("omegaconf").OmegaConf.load(files.agent_loop)
        assert entries[0].name == "patchgym_swe"
        assert entries[0]._target_ == "patchgym_trainer.engines.verl.agent_loop.SWEAgentLoop"
