"""A tiny random-weight chat model built offline (no hub): for CPU end-to-end runs and tests.

``train_tokenizer`` trains a real byte-level BPE tokenizer with ``tokenizers`` and wraps it
as a ``transformers`` tokenizer with a ChatML template; ``build_tiny_model`` adds a
randomly initialised Qwen2 (a few million parameters) and saves both to a folder that
``transformers``, vLLM and verl load like any Hugging Face model. Needs the ``cpu``
or ``gpu`` extra (``transformers``, ``torch``).

    python -m patchgym_trainer.testing.tiny_model /tmp/tiny-qwen
    python -m patchgym_trainer.testing.tiny_model /tmp/q05 --shape qwen2.5-0.5b   # GPU benches
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def default_corpus() -> list[str]:
    """Texts the model will see: bundled tasks and every scaffold's system prompt."""
    from patchgym_agents import agent_scaffold
    from patchgym_envs import bundled_tasks

    corpus: list[str] = []
    for task in bundled_tasks():
        corpus += [task.problem_statement, task.gold_patch]
    for name in ("r2egym", "sweagent", "debug-gym"):
        corpus.append(agent_scaffold(name).system_prompt("text"))
    return corpus


def train_tokenizer(corpus: Iterable[str] | None = None, vocab_size: int = 1200) -> Any:
    """A byte-level BPE ``PreTrainedTokenizerFast`` with a ChatML chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(
        list(corpus if corpus is not None else default_corpus()), trainer=trainer
    )
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]  # transformers leaves this constructor unannotated
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def small_dims(hidden: int, layers: int) -> dict[str, int]:
    """A small model's dimensions: 4 heads, 2 KV heads, an MLP twice as wide."""
    return {
        "hidden": hidden,
        "layers": layers,
        "heads": 4,
        "kv_heads": 2,
        "intermediate": 2 * hidden,
    }


SHAPES: dict[str, dict[str, int]] = {
    "tiny": small_dims(64, 2),
    "qwen2.5-0.5b": {
        "hidden": 896, "layers": 24, "heads": 14, "kv_heads": 2, "intermediate": 4864,
    },
}  # fmt: skip
"""Model shapes by name. ``qwen2.5-0.5b`` is Qwen2.5-0.5B-Instruct's (a 1,200-token
vocabulary instead of 151,936: 359 M parameters): random weights of a real model's size,
to measure a GPU node's generation and training speed with no hub."""


def qwen2_config(tok: Any, dims: dict[str, int]) -> Any:
    """A ``Qwen2Config`` of ``dims`` (a :data:`SHAPES` entry) for the tokenizer ``tok``."""
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=len(tok),
        hidden_size=dims["hidden"],
        intermediate_size=dims["intermediate"],
        num_hidden_layers=dims["layers"],
        num_attention_heads=dims["heads"],
        num_key_value_heads=dims["kv_heads"],
        max_position_embeddings=65536,
        bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
    )


def build_tiny_model(
    out_dir: str | Path,
    *,
    seed: int = 0,
    hidden: int = 64,
    layers: int = 2,
    shape: str | None = None,
) -> Path:
    """Save a random Qwen2 + the BPE tokenizer to ``out_dir``; returns the folder.

    ``shape`` (a :data:`SHAPES` name) sets every dimension; otherwise ``hidden`` and
    ``layers`` do (:func:`small_dims`)."""
    import torch
    from transformers import Qwen2ForCausalLM

    dims = SHAPES[shape] if shape is not None else small_dims(hidden, layers)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer()
    torch.manual_seed(seed)
    config = qwen2_config(tok, dims)
    model = Qwen2ForCausalLM(config)  # type: ignore[no-untyped-call]  # transformers leaves this constructor unannotated
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def main(argv: list[str]) -> None:
    """``python -m patchgym_trainer.testing.tiny_model [DIR] [--shape NAME]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m patchgym_trainer.testing.tiny_model")
    ap.add_argument("out", nargs="?", default="tiny-qwen")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    args = ap.parse_args(argv)
    print(build_tiny_model(args.out, shape=args.shape))


if __name__ == "__main__":
    main(sys.argv[1:])
