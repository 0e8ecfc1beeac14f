"""Will ``train.static_cache`` fit on the GPU? Its KV cache is allocated whole, up front.

``engine=trl`` with ``train.static_cache=true`` decodes each step into one static cache of
(the step's acting episodes, up to ``MAX_BATCH``) x (max prompt + max response + one turn)
tokens. Its size follows from the model's ``config.json`` alone (layers x K and V x KV heads
x head size x bytes per value); the training state beside it from the weights' files
(bf16 weights, gradients and AdamW's two moments: 8 bytes a parameter, a frozen reference
copy when the KL term is on). A config whose cache and state outrun the GPU's memory would
fail at the first step's allocation, after the GPUs are booked: preflight fails it first.
Activations are not counted (they depend on the batch's real lengths): past 80 % of the
GPU's memory the row warns.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from patchgym_trainer.engines.trl.generate import MAX_BATCH, static_cache_len
from patchgym_trainer.preflight.rules import Check
from patchgym_trainer.schema import TrainSettings

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
TRAIN_BYTES_PER_PARAM = 8
"""bf16 weights, gradients and AdamW's two moments (torch keeps them in the weights' dtype)."""
REFERENCE_BYTES_PER_PARAM = 2
"""The frozen reference policy of the KL term (``algorithm.use_kl_loss``), bf16."""
WARN_SHARE = 0.8
GIB = 1 << 30


class ModelDims(BaseModel):
    """What the KV cache's size and the training state's follow from."""

    layers: int
    kv_heads: int
    head_dim: int
    params: int
    """From the weights' files (tensor bytes / bytes per stored value)."""


def model_dims(folder: Path) -> ModelDims:
    """``folder``'s ``config.json`` (its ``text_config`` where it nests one) and weights;
    raises ``ValueError`` naming what is missing."""
    raw = json.loads((folder / "config.json").read_text())
    cfg = raw.get("text_config") or raw
    missing = [k for k in ("num_hidden_layers", "num_attention_heads") if k not in cfg]
    if missing or not ("head_dim" in cfg or "hidden_size" in cfg):
        raise ValueError(f"{folder / 'config.json'} has no {', '.join(missing) or 'hidden_size'}")
    heads = int(cfg["num_attention_heads"])
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    stored = sum(tensor_bytes(p) for p in folder.glob("*.safetensors"))
    if not stored:
        raise ValueError(f"{folder} has no *.safetensors weights")
    return ModelDims(
        layers=int(cfg["num_hidden_layers"]),
        kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads),
        params=stored // DTYPE_BYTES.get(dtype, 2),
    )


def tensor_bytes(path: Path) -> int:
    """The tensors' bytes in a ``.safetensors`` file: its size less the 8-byte length and
    the JSON header that length counts."""
    with open(path, "rb") as fh:
        header = int.from_bytes(fh.read(8), "little")
    return max(0, path.stat().st_size - 8 - header)


def cache_rows(train: TrainSettings) -> int:
    """The static cache's rows: a step's episodes that the model acts in."""
    acting = train.rollout_n - min(train.force_gold_samples, train.rollout_n)
    return min(train.train_batch_size * acting, MAX_BATCH)


def cache_bytes(dims: ModelDims, rows: int, length: int, value_bytes: int = 2) -> int:
    """K and V of every layer for ``rows`` x ``length`` tokens (bf16 on a GPU)."""
    return rows * length * dims.layers * 2 * dims.kv_heads * dims.head_dim * value_bytes


def static_cache_check(
    train: TrainSettings,
    folder: Path | None,
    gpu_bytes: int | None,
    *,
    reference: bool,
) -> Check | None:
    """The ``static cache`` row; None where ``train.static_cache`` is off or the engine
    is not ``trl`` (the only one that has it)."""
    if train.engine != "trl" or not train.static_cache:
        return None
    name = "static cache"
    off = "train.static_cache=false"
    if gpu_bytes is None:
        return Check(
            name=name,
            status="warn",
            detail="train.static_cache on a machine with no CUDA GPU: nothing compiles the "
            "decode step there, and the whole cache is attended every token (slower than "
            "the dynamic cache on CPU)",
            fix=off,
        )
    if folder is None:
        return Check(
            name=name, status="warn", detail="cannot size it: the model is not found (see model)"
        )
    try:
        dims = model_dims(folder)
    except (OSError, ValueError) as exc:
        return Check(name=name, status="warn", detail=f"cannot size it: {exc}")
    rows = cache_rows(train)
    length = static_cache_len(
        train.max_prompt_length, train.max_response_length, train.max_new_tokens_per_turn
    )
    cache = cache_bytes(dims, rows, length)
    state = dims.params * (TRAIN_BYTES_PER_PARAM + (REFERENCE_BYTES_PER_PARAM if reference else 0))
    need = cache + state
    detail = (
        f"cache {cache / GIB:.1f} GiB ({rows} rows x {length} tokens x {dims.layers} layers x "
        f"{dims.kv_heads} KV heads x {dims.head_dim}) + training state {state / GIB:.1f} GiB "
        f"({dims.params / 1e9:.2f} B params) = {need / GIB:.1f} GiB of the GPU's "
        f"{gpu_bytes / GIB:.1f} GiB"
    )
    shrink = (
        f"{off}, or a shorter cache: lower train.max_response_length "
        f"({train.max_response_length}) or train.rollout_n ({train.rollout_n})"
    )
    if need > gpu_bytes:
        return Check(name=name, status="fail", detail=detail + ": does not fit", fix=shrink)
    if need > WARN_SHARE * gpu_bytes:
        return Check(
            name=name,
            status="warn",
            detail=detail + f": over {WARN_SHARE:.0%}, activations need the rest",
            fix=shrink,
        )
    return Check(name=name, status="pass", detail=detail)
