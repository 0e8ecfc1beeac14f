"""engine=trl pieces without a training run (nox -s train_cpu runs the real step).

The config maps onto TRL's ``GRPOConfig``; the rollout's token layout matches the chat
template; a gold-forced episode is graded in a real local sandbox and leaves none behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import require

from patchgym_envs import EnvConfig, bundled_tasks
from patchgym_trainer.compose import compose

pytestmark = [require("trl", "cpu"), require("torch", "cpu")]


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from patchgym_trainer.testing.tiny_model import train_tokenizer

    return train_tokenizer()


def _rollout(tokenizer: Any, tmp_path: Path, **settings: Any) -> Any:
    from patchgym_trainer.engines.trl.rollout import EpisodeRollout, RolloutSettings

    base = {
        "scaffold": "r2egym",
        "max_turns": 8,
        "max_new_tokens_per_turn": 16,
        "max_completion_tokens": 4096,
        "num_generations": 2,
        "force_gold": 1,
    }
    env = EnvConfig(sandbox={"type": "local", "state_dir": str(tmp_path / "sb")}, run_id="t")
    return EpisodeRollout(
        bundled_tasks()[:1],
        env=env,
        settings=RolloutSettings(**{**base, **settings}),
        tokenizer=tokenizer,
    )


def test_cpu_smoke_preset_maps_onto_grpo_config(tmp_path: Path) -> None:
    from patchgym_trainer.engines.trl.launch import grpo_args

    cfg = compose(["preset=cpu_smoke", "model.path=/models/tiny"])
    assert cfg.train.engine == "trl" and cfg.train.force_gold_samples == 1
    args = grpo_args(cfg, tmp_path)
    assert args.num_generations == cfg.train.rollout_n == 2
    assert args.per_device_train_batch_size == cfg.train.train_batch_size * cfg.train.rollout_n
    assert args.max_steps == cfg.train.total_training_steps == 1
    assert args.beta == 0.0  # algorithm.use_kl_loss=false: no reference model
    assert args.learning_rate == cfg.algorithm.lr


def test_observation_tokens_follow_the_chat_template(tokenizer: Any, tmp_path: Path) -> None:
    """prompt + assistant tokens + context tokens == the template over the whole conversation."""
    r = _rollout(tokenizer, tmp_path)
    try:
        before = [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": "<function=finish>"},
        ]
        after = [*before, {"role": "user", "content": "ERROR: no such tool"}]
        prompt = r._encode(r._render(before[:2], True))
        reply = [*r._encode("<function=finish>"), tokenizer.eos_token_id]
        ctx = r._context_tokens(before, after, ended=True)
        assert tokenizer.decode(prompt + reply + ctx) == r._render(after, True)
    finally:
        r.close()


def test_gold_forced_episode_is_graded_in_a_real_sandbox(tokenizer: Any, tmp_path: Path) -> None:
    r = _rollout(tokenizer, tmp_path)
    try:
        task = bundled_tasks()[0]
        ep = r._runner.run(r._episode(task, None, "gold-0", forced=True))
    finally:
        r.close()
    assert ep.infra_error is None and ep.forced_gold
    assert ep.reward == 1.0 and ep.resolved, ep
    assert ep.hack_flags == [] and not ep.masked  # logged as hack/* rates per step
    assert len(ep.env_mask) == len(ep.completion_ids)
    assert 1 in ep.env_mask and 0 in ep.env_mask  # actions and observations both present
    assert "<function=" in tokenizer.decode(ep.completion_ids)
    assert not list((tmp_path / "sb").glob("*/record.json"))  # the sandbox was closed


def test_unknown_prompt_is_an_error_naming_it(tokenizer: Any, tmp_path: Path) -> None:
    r = _rollout(tokenizer, tmp_path)
    try:
        with pytest.raises(KeyError, match="not one of the dataset's tasks"):
            r._runner.run(r._run_all([[{"role": "user", "content": "who am I"}]], None))
    finally:
        r.close()


@require("verl", "cpu")
def test_cpu_platform_keeps_trainer_device_cpu() -> None:
    """The platform module verl loads through VERL_USE_EXTERNAL_MODULES (README: the walls)."""
    from omegaconf import OmegaConf
    from verl.plugin.platform import platform_manager as pm
    from verl.utils.device import auto_set_device

    from patchgym_trainer.engines.verl.cpu_platform import PlatformCPU

    assert pm.PlatformRegistry.get("cpu") is PlatformCPU
    saved = pm._current_platform
    try:
        pm._current_platform = PlatformCPU()
        cfg = OmegaConf.create({"trainer": {"device": "cpu"}})
        auto_set_device(cfg)
        assert cfg.trainer.device == "cpu"
        assert pm._current_platform.communication_backend_name() == "gloo"
        assert not pm._current_platform.is_ipc_supported()
    finally:
        pm._current_platform = saved


def test_static_cache_decodes_what_the_dynamic_cache_decodes(tmp_path: Path) -> None:
    """``hf_batch_fn(static=...)``: filler rows, one reused cache and a too-big call that
    falls back change no token (greedy, the tiny model on CPU, where nothing compiles)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from patchgym_trainer.engines.trl.generate import hf_batch_fn
    from patchgym_trainer.testing.tiny_model import build_tiny_model

    folder = build_tiny_model(tmp_path / "tiny", hidden=32, layers=2)
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    text = [t.problem_statement for t in bundled_tasks()]
    calls = [  # (contexts, new tokens): a full batch, fewer rows and wider, then too many
        ([tok(x)["input_ids"][:40] for x in text[:4]], 12),
        ([tok(text[4])["input_ids"][:70], tok(text[5])["input_ids"][:9]], 20),
        ([tok(x)["input_ids"][:30] for x in text[:6]], 8),
    ]
    dynamic = hf_batch_fn(model, tok, temperature=0)
    static = hf_batch_fn(model, tok, temperature=0, static=(4, 128))
    for contexts, n in calls:
        want = dynamic(contexts, n)
        assert static(contexts, n) == want
        assert all(0 < len(w) <= n for w in want)


def test_train_static_cache_sizes_the_cache_for_a_whole_episode() -> None:
    from patchgym_trainer.engines.trl.launch import rollout_settings

    cfg = compose(["preset=gpu_smoke", "model.path=/models/tiny"])
    assert rollout_settings(cfg).static_cache_len is None  # off unless asked
    t = compose(["preset=gpu_smoke", "model.path=/models/tiny", "train.static_cache=true"]).train
    want = t.max_prompt_length + t.max_response_length + t.max_new_tokens_per_turn
    assert rollout_settings(cfg.model_copy(update={"train": t})).static_cache_len == want


def test_the_qwen05b_shape_is_qwen25_05b_less_its_vocabulary(tokenizer: Any) -> None:
    """``--shape qwen2.5-0.5b`` (GPU benches with no hub): Qwen2.5-0.5B-Instruct's published
    dimensions; 358,973,312 parameters with our 1,200-token vocabulary (as built on the H200)."""
    import torch
    from transformers import Qwen2ForCausalLM

    from patchgym_trainer.testing.tiny_model import SHAPES, qwen2_config

    dims = SHAPES["qwen2.5-0.5b"]
    assert (dims["hidden"], dims["layers"], dims["heads"], dims["kv_heads"]) == (896, 24, 14, 2)
    assert dims["intermediate"] == 4864
    with torch.device("meta"):
        model = Qwen2ForCausalLM(qwen2_config(tokenizer, dims))
    assert sum(p.numel() for p in model.parameters()) == 358_973_312
