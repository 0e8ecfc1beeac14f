"""A tiny random-weight chat model built offline (no hub): for CPU end-to-end runs and tests.

``train_tokenizer`` trains a real byte-level BPE tokenizer with ``tokenizers`` and wraps it
as a ``transformers`` tokenizer with a ChatML template; ``build_tiny_model`` adds a
randomly initialised Qwen2 (a few million parameters) and saves both to a folder that
``transformers``, vLLM and verl load like any Hugging Face model. Needs the ``cpu``
or ``gpu`` extra (``transformers``, ``torch``).

    python -m patchgym_trainer.testing.tiny_model /tmp/tiny-qwen
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


def build_tiny_model(
    out_dir: str | Path, *, seed: int = 0, hidden: int = 64, layers: int = 2
) -> Path:
    """Save a random Qwen2 + the BPE tokenizer to ``out_dir``; returns the folder."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer()
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=65536,
        bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
    )
    model = Qwen2ForCausalLM(config)  # type: ignore[no-untyped-call]  # transformers leaves this constructor unannotated
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else "tiny-qwen"
    print(build_tiny_model(target))
