"""One TRL rollout + update, sequential vs batched (vs static cache), in one run: where the step's time goes.

    UV_PROJECT_ENVIRONMENT=/tmp/venv-cpu uv run --package patchgym-trainer --extra cpu \\
        python bench/train_step.py                       # CPU: the tiny model, built here
    python bench/train_step.py --model /models/Qwen2.5-0.5B-Instruct --max-new-tokens 256
    python bench/train_step.py --shape qwen2.5-0.5b --static-cache   # a GPU node, no hub
    python bench/train_step.py --shape qwen2.5-0.5b --static-cache --static-runs 2 --no-sequential

The rows run the same episodes (``--tasks`` bundled tasks x ``--samples``, local
sandboxes, the model acting) through :class:`~patchgym_trainer.engines.trl.rollout.EpisodeRollout`:
``sequential`` is one episode and one sequence per ``generate`` at a time (the engine
before batching), ``batched`` runs the episodes concurrently and generates each turn for
all live episodes in one call; with ``--static-cache`` a third row batches into one static
KV cache (``train.static_cache=true``: on a GPU ``transformers`` then compiles the decode
step, and the row's first turn pays that compile). Per row: rollout wall time, the part spent generating,
the rest (sandboxes: create, tools, grading), one update (forward + backward over every
sample's tokens), generated tokens per second of generation, and how busy the GPU was
during the rollout (NVML utilisation sampled every 50 ms and averaged, when ``pynvml``
and a GPU are there).
bf16 on a GPU that supports it, fp32 on CPU. Not a test: nothing here fails.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from patchgym_envs import EnvConfig, bundled_tasks
from patchgym_trainer.engines.trl.generate import static_cache_len
from patchgym_trainer.engines.trl.rollout import (
    EpisodeRollout,
    RolloutSettings,
    prompt_messages,
)

PROMPT_TOKENS = 4096
"""Room for the scaffold's prompt in the static cache's length (``--static-cache``)."""


class GpuBusy:
    """NVML GPU utilisation (the share of each sample period a kernel ran), sampled while
    running; reported as the mean over the samples."""

    def __init__(self) -> None:
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._handle: Any = None
        try:
            import pynvml  # type: ignore[import-not-found]

            pynvml.nvmlInit()
            self._nvml: Any = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:
            self._nvml = None

    def __enter__(self) -> GpuBusy:
        if self._handle is not None:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._handle is not None:
            self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self.samples.append(int(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu))

    def fraction(self) -> str:
        if not self.samples:
            return "n/a"
        return f"{sum(self.samples) / len(self.samples):.0f}%"


def load(model_path: str | None, shape: str = "tiny") -> tuple[Any, Any, str]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if model_path is None:
        from patchgym_trainer.testing.tiny_model import build_tiny_model

        model_path = str(Path(tempfile.mkdtemp(prefix="pg-bench-tiny-")) / "tiny-qwen")
        build_tiny_model(model_path, shape=shape)
    cuda = torch.cuda.is_available()
    dtype = torch.bfloat16 if cuda and torch.cuda.is_bf16_supported() else torch.float32
    tok = AutoTokenizer.from_pretrained(model_path)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
    model.to("cuda" if cuda else "cpu")
    return model, tok, f"{'cuda' if cuda else 'cpu'} {str(dtype).removeprefix('torch.')}"


def update(model: Any, episodes: list[Any]) -> float:
    """One forward + backward over every sample (what the optimiser step costs, roughly)."""
    import torch

    started = time.perf_counter()
    model.train()
    for e in episodes:
        ids = torch.tensor([e.prompt_ids + e.completion_ids], device=model.device)
        loss = model(ids, labels=ids).loss
        loss.backward()
    model.zero_grad(set_to_none=True)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    model.eval()
    return time.perf_counter() - started


def row(name: str, model: Any, tok: Any, args: argparse.Namespace) -> list[str]:
    tasks = bundled_tasks()[: args.tasks]
    settings = RolloutSettings(
        scaffold="r2egym",
        max_turns=args.turns,
        max_new_tokens_per_turn=args.max_new_tokens,
        max_completion_tokens=args.max_new_tokens * args.turns * 4,
        num_generations=args.samples,
        batched=name != "sequential",
        static_cache_len=(
            static_cache_len(
                PROMPT_TOKENS, args.max_new_tokens * args.turns * 4, args.max_new_tokens
            )
            if name.startswith("batched, static cache")
            else None
        ),
    )
    env = EnvConfig(max_steps=args.turns, step_timeout_s=60, run_id=f"bench-{name}")
    rollout = EpisodeRollout(tasks, env=env, settings=settings, tokenizer=tok)
    prompts = [prompt_messages(t, "r2egym") for t in tasks for _ in range(args.samples)]
    gen_s = [0.0]
    gen_tokens = [0]
    plain = rollout._generate

    def timed(model: Any, context: list[int], n: int) -> list[int]:
        t0 = time.perf_counter()
        out = plain(model, context, n)
        gen_s[0] += time.perf_counter() - t0
        gen_tokens[0] += len(out)
        return out

    rollout._generate = timed  # type: ignore[method-assign]
    try:
        with GpuBusy() as busy:
            t0 = time.perf_counter()
            episodes = rollout.run_episodes(prompts, model)
            wall = time.perf_counter() - t0
    finally:
        rollout.close()
    if rollout.generator is not None:
        gen_s[0] = rollout.generator.stats.seconds
        gen_tokens[0] = rollout.generator.stats.new_tokens
    upd = update(model, episodes)
    infra = sum(e.infra_error is not None for e in episodes)
    return [
        name,
        str(len(episodes)) + (f" ({infra} infra)" if infra else ""),
        f"{wall:.1f}",
        f"{gen_s[0]:.1f}",
        f"{wall - gen_s[0]:.1f}",
        f"{upd:.1f}",
        str(gen_tokens[0]),
        f"{gen_tokens[0] / gen_s[0]:.0f}" if gen_s[0] else "-",
        busy.fraction(),
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="a local HF model folder (default: --shape)")
    p.add_argument(
        "--shape",
        default="tiny",
        help="without --model, a random model of this shape, built here "
        "(patchgym_trainer.testing.tiny_model.SHAPES: tiny, qwen2.5-0.5b)",
    )
    p.add_argument("--tasks", type=int, default=6)
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument(
        "--static-cache",
        action="store_true",
        help="a third row: batched into one static KV cache (train.static_cache=true; on a GPU, "
        "transformers compiles the decode step: the first turn pays the compile)",
    )
    p.add_argument(
        "--static-runs",
        type=int,
        default=1,
        help="with --static-cache, run the static row this many times: the first pays the "
        "compile, the next ones show the compiled decode step alone",
    )
    p.add_argument(
        "--no-sequential",
        action="store_true",
        help="skip the sequential row (the slowest: a GPU node's time is often short)",
    )
    args = p.parse_args()
    console = Console(width=160)
    model, tok, where = load(args.model, args.shape)
    table = Table(title=f"train step phases ({where}, {args.tasks} tasks x {args.samples})")
    for col in ("mode", "episodes", "rollout s", "generate s", "env s", "update s",
                "new tokens", "tokens/s", "GPU busy"):  # fmt: skip
        table.add_column(col, justify="right")
    names = [] if args.no_sequential else ["sequential"]
    names += ["batched"]
    if args.static_cache:
        names += ["batched, static cache"]
        names += [f"batched, static cache, run {i + 2}" for i in range(args.static_runs - 1)]
    rows = [row(name, model, tok, args) for name in names]
    for r in rows:
        table.add_row(*r)
    console.print(table)
    rate = {r[0]: float(r[7]) if r[7] != "-" else 0.0 for r in rows}
    seq, bat, static = (
        rate.get(n, 0.0) for n in ("sequential", "batched", "batched, static cache")
    )
    if seq and bat:
        console.print(f"batched / sequential tokens/s: {bat / seq:.1f}x")
    if static and bat:
        console.print(f"static cache / batched tokens/s: {static / bat:.1f}x")
    for name, r in rate.items():
        if name.startswith("batched, static cache, run") and r and bat:
            console.print(f"{name} (compiled) / batched tokens/s: {r / bat:.1f}x")


if __name__ == "__main__":
    main()
