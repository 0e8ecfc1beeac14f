"""Generation for concurrent episodes: one batched ``model.generate`` per turn.

The episodes of a batch run concurrently on one event loop; each asks for its next turn
with :meth:`BatchedGenerator.generate` (``context`` token ids, at most ``max_new_tokens``).
Requests are held until every live episode is waiting for the model (the others are in
the environment or done), then answered by one call of the batch function in a worker
thread: a GPU then decodes all live sequences at once instead of one per call. No timer
decides when a batch goes: an episode that ends, or starts waiting, re-checks the rule.

The interface is narrow on purpose — an episode driver announces its model-driven episodes
(:meth:`expect`), asks for turns (:meth:`generate`) and says when each ends
(:meth:`finished`) — so any loop can use it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

BatchFn = Callable[[list[list[int]], int], list[list[int]]]
"""(contexts, max_new_tokens) -> new tokens per context (each ends at EOS if it stopped)."""


@dataclass
class GenerationStats:
    calls: int = 0
    sequences: int = 0
    new_tokens: int = 0
    seconds: float = 0.0
    batch_sizes: list[int] = field(default_factory=list)


MAX_BATCH = 256
"""Most sequences one batched call decodes."""


def static_cache_len(max_prompt: int, max_completion: int, per_turn: int) -> int:
    """The static cache's tokens per episode: the longest prompt, the whole completion and
    one more turn (a turn is generated onto a context that may hold all the rest)."""
    return max_prompt + max_completion + per_turn


class BatchedGenerator:
    """Gathers the live episodes' requests into one batch per turn (see the module doc)."""

    def __init__(self, batch_fn: BatchFn, *, max_batch: int = MAX_BATCH) -> None:
        self._batch_fn = batch_fn
        self._max_batch = max_batch
        self._live = 0
        self._pending: list[tuple[list[int], int, asyncio.Future[list[int]]]] = []
        self._running = False
        self.stats = GenerationStats()

    def expect(self, n: int) -> None:
        """``n`` more episodes will ask for turns (announce them all before any asks)."""
        self._live += n

    def finished(self) -> None:
        """One announced episode will ask for no more turns."""
        self._live -= 1
        self._maybe_flush()

    async def generate(self, context: list[int], max_new_tokens: int) -> list[int]:
        fut: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
        self._pending.append((context, max_new_tokens, fut))
        self._maybe_flush()
        return await fut

    def _maybe_flush(self) -> None:
        ready = self._pending and (
            len(self._pending) >= min(self._live, self._max_batch) or self._live == 0
        )
        if ready and not self._running:
            batch, self._pending = (
                self._pending[: self._max_batch],
                self._pending[self._max_batch :],
            )
            self._running = True
            asyncio.get_running_loop().create_task(self._run(batch))

    async def _run(self, batch: list[tuple[list[int], int, asyncio.Future[list[int]]]]) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        longest = max(n for _, n, _ in batch)
        try:
            outs = await asyncio.to_thread(self._batch_fn, [c for c, _, _ in batch], longest)
        except BaseException as exc:
            for _, _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
        else:
            for (_, n, fut), new in zip(batch, outs, strict=True):
                if not fut.done():
                    fut.set_result(new[:n])
                self.stats.new_tokens += len(new[:n])
            self.stats.calls += 1
            self.stats.sequences += len(batch)
            self.stats.batch_sizes.append(len(batch))
        finally:
            self.stats.seconds += loop.time() - started
            self._running = False
            self._maybe_flush()


def hf_batch_fn(
    model: Any,
    tokenizer: Any,
    *,
    temperature: float,
    static: tuple[int, int] | None = None,
) -> BatchFn:
    """A :data:`BatchFn` over a ``transformers`` model: left-padded, sampled, cut at EOS.

    ``static=(rows, length)``: decode into one ``StaticCache`` of ``rows`` x ``length``
    tokens, made once and reset each call, every batch padded to ``rows`` (a one-token
    filler row per missing episode): each decode step then has the same shapes on every
    call, which is what lets ``transformers`` compile it once on a GPU (CUDA graphs; plain
    ``generate`` on a launch-bound model ran 4.6x faster so, see the trainer README). A call
    that does not fit (more contexts than ``rows``, or context + new tokens over
    ``length``) runs with the default dynamic cache instead. ``temperature`` 0 decodes
    greedily.
    """
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    cache: list[Any] = []

    def static_cache() -> Any:
        if not cache:
            from transformers import StaticCache

            assert static is not None
            cache.append(StaticCache(config=model.config, max_cache_len=static[1]))
        cache[0].reset()
        return cache[0]

    def run(contexts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        import torch

        n = len(contexts)
        width = max(len(c) for c in contexts)
        fits = static is not None and n <= static[0] and width + max_new_tokens <= static[1]
        rows = contexts + [[pad]] * (static[0] - n) if fits and static is not None else contexts
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, c in enumerate(rows):
            ids[i, width - len(c) :] = torch.tensor(c, dtype=torch.long)
            mask[i, width - len(c) :] = 1
        sampling: dict[str, Any] = (
            {"do_sample": True, "temperature": temperature}
            if temperature > 0
            else {"do_sample": False}
        )
        with torch.no_grad():
            out = model.generate(
                ids.to(model.device),
                attention_mask=mask.to(model.device),
                max_new_tokens=max_new_tokens,
                pad_token_id=pad,
                eos_token_id=tokenizer.eos_token_id,
                **({"past_key_values": static_cache()} if fits else {}),
                **sampling,
            )
        result: list[list[int]] = []
        for row in out[:n, width:].tolist():
            new = [int(t) for t in row]
            if tokenizer.eos_token_id in new:
                new = new[: new.index(tokenizer.eos_token_id) + 1]
            result.append(new)
        return result

    return run
