"""The ``static cache`` preflight row: the cache's size as ``transformers`` allocates it, the
training state from the weights' files, and the verdict against the GPU's memory."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from patchgym_trainer.compose import compose
from patchgym_trainer.engines.trl.generate import MAX_BATCH
from patchgym_trainer.preflight import gpu_memory
from patchgym_trainer.preflight.gpu_memory import GIB, ModelDims, cache_bytes, model_dims
from patchgym_trainer.schema import TrainSettings


def test_model_dims_of_a_real_model_and_the_cache_transformers_allocates(tmp_path: Path) -> None:
    """Dimensions and parameters read from a saved model's files equal the loaded model's;
    the cache's size equals the bytes of a ``StaticCache`` after one forward pass fills it."""
    import torch
    from transformers import AutoModelForCausalLM, StaticCache

    from patchgym_trainer.testing.tiny_model import build_tiny_model

    folder = build_tiny_model(tmp_path / "tiny", hidden=32, layers=3)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    dims = model_dims(folder)
    c = model.config
    assert (dims.layers, dims.kv_heads) == (c.num_hidden_layers, c.num_key_value_heads)
    assert dims.head_dim == c.hidden_size // c.num_attention_heads
    params = sum(p.numel() for p in model.parameters())
    assert dims.params == params

    rows, length = 3, 48
    cache = StaticCache(config=c, max_cache_len=length)
    with torch.no_grad():
        model(torch.ones((rows, 5), dtype=torch.long), past_key_values=cache, use_cache=True)
    allocated = sum(t.nbytes for layer in cache.layers for t in (layer.keys, layer.values))
    assert allocated == cache_bytes(dims, rows, length, value_bytes=4)


def qwen25_05b(folder: Path) -> Path:
    """Qwen2.5-0.5B-Instruct's published ``config.json`` fields and a sparse weights file of
    its size (494,032,768 bf16 parameters): what preflight reads, without the hub."""
    folder.mkdir()
    config = {
        "architectures": ["Qwen2ForCausalLM"], "hidden_size": 896, "num_hidden_layers": 24,
        "num_attention_heads": 14, "num_key_value_heads": 2, "intermediate_size": 4864,
        "vocab_size": 151936, "torch_dtype": "bfloat16", "tie_word_embeddings": True,
    }  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    with open(folder / "model.safetensors", "wb") as fh:
        fh.truncate(494_032_768 * 2)
    return folder


def check(train: TrainSettings, folder: Path | None, gpu_gib: float | None) -> Any:
    gpu = None if gpu_gib is None else int(gpu_gib * GIB)
    return gpu_memory.static_cache_check(train, folder, gpu, reference=False)


def test_gpu_qwen05b_fits_the_24_gb_its_preset_names(tmp_path: Path) -> None:
    train = compose(["preset=gpu_qwen05b", "model.path=/models/any"]).train
    assert train.static_cache
    row = check(train, qwen25_05b(tmp_path / "q"), 24)
    assert row.status == "pass", row
    # 24 rows x 12,800 tokens x 24 layers x K,V x 2 heads x 64 x bf16 = 3.5 GiB
    assert "cache 3.5 GiB (24 rows x 12800 tokens" in row.detail
    assert "0.49 B params" in row.detail


@pytest.mark.parametrize(
    ("gpu_gib", "status"), [(80, "pass"), (8.5, "warn"), (7.0, "fail")]
)  # fmt: skip
def test_the_verdict_follows_the_gpus_memory(tmp_path: Path, gpu_gib: float, status: str) -> None:
    """Cache 3.5 GiB + state 3.7 GiB = 7.2 GiB: fits 80, over 80 % of 8.5, over 7."""
    train = compose(["preset=gpu_qwen05b", "model.path=/models/any"]).train
    row = check(train, qwen25_05b(tmp_path / "q"), gpu_gib)
    assert row.status == status, row
    if status != "pass":
        assert "train.static_cache=false" in row.fix and "train.max_response_length" in row.fix


def test_no_row_without_the_static_cache_and_warnings_where_it_cannot_be_sized(
    tmp_path: Path,
) -> None:
    off = TrainSettings(engine="trl")
    assert check(off, None, 80) is None
    assert check(TrainSettings(engine="verl", static_cache=True), None, 80) is None
    on = TrainSettings(engine="trl", static_cache=True)
    cpu = check(on, None, None)
    assert cpu.status == "warn" and "no CUDA GPU" in cpu.detail and cpu.fix
    assert check(on, None, 80).status == "warn"  # the model row names why it is not found
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text(json.dumps({"num_hidden_layers": 2}))
    row = check(on, bare, 80)
    assert row.status == "warn" and "num_attention_heads" in row.detail


def test_cache_rows_leave_out_gold_forced_samples_and_stop_at_max_batch() -> None:
    dims = ModelDims(layers=1, kv_heads=1, head_dim=1, params=0)
    assert gpu_memory.cache_rows(TrainSettings(train_batch_size=6, rollout_n=4)) == 24
    forced = TrainSettings(train_batch_size=6, rollout_n=4, force_gold_samples=1)
    assert gpu_memory.cache_rows(forced) == 18
    assert gpu_memory.cache_rows(TrainSettings(train_batch_size=512, rollout_n=8)) == MAX_BATCH
    assert cache_bytes(dims, 2, 10) == 2 * 10 * 2 * 2  # rows x tokens x K,V x bf16


def test_model_folder_finds_a_hub_id_in_the_cache(tmp_path: Path, monkeypatch: Any) -> None:
    """The row sizes the model the ``model`` row found: a local folder, or a hub id's
    snapshot in the Hugging Face cache."""
    from patchgym_trainer.preflight import probes
    from patchgym_trainer.schema import ModelConfig

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    snap = tmp_path / "hub" / "models--Qwen--Qwen2.5-0.5B-Instruct" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    hub = ModelConfig(name="qwen", path="Qwen/Qwen2.5-0.5B-Instruct")
    assert probes.model_folder(hub) is None and probes.model(hub).status == "fail"
    (snap / "config.json").write_text("{}")
    assert probes.model_folder(hub) == snap
    assert probes.model(hub).status == "pass"
    newer = snap.parent / "def"
    newer.mkdir()
    (newer / "config.json").write_text("{}")
    assert probes.model_folder(hub) == snap  # no refs/main: the first snapshot
    (snap.parents[1] / "refs").mkdir()
    (snap.parents[1] / "refs" / "main").write_text("def\n")
    assert probes.model_folder(hub) == newer  # what transformers would load
    assert probes.model_folder(ModelConfig(name="x", path=str(tmp_path / "none"))) is None
    assert probes.model_folder(ModelConfig(name="x", path=str(snap))) == snap


@pytest.mark.parametrize(
    ("printed", "want"),
    [("81559\n81559\n", (2, 81559 << 20)), ("[N/A]\n", (1, None)), ("", (0, None))],
)
def test_gpus_from_nvidia_smi_where_torch_sees_no_cuda(
    tmp_path: Path, monkeypatch: Any, printed: str, want: tuple[int, int | None]
) -> None:
    """No CUDA for torch here: the count and the first GPU's memory come from one
    ``nvidia-smi`` query, a line per GPU (the tool stood in by a script printing its format)."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("torch sees a GPU: the nvidia-smi fallback is not taken")
    from patchgym_trainer.preflight import probes

    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nprintf '{printed}'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert probes.gpus() == want
