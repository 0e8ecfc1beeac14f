"""BatchedGenerator: one batch per turn across the live episodes, never waiting on a
finished one (no timer decides; the batch function stands in for the model)."""

from __future__ import annotations

import asyncio

from patchgym_trainer.engines.trl.generate import BatchedGenerator


def echo_batch(calls: list[int]):
    def run(contexts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        calls.append(len(contexts))
        return [[c[-1] + 1] * max_new_tokens for c in contexts]

    return run


async def test_turns_of_live_episodes_go_in_one_batch() -> None:
    calls: list[int] = []
    gen = BatchedGenerator(echo_batch(calls))

    async def episode(i: int, turns: int) -> list[int]:
        ctx = [i]
        try:
            for _ in range(turns):
                ctx += await gen.generate(ctx, 2)
                await asyncio.sleep(0)  # the environment's step
            return ctx
        finally:
            gen.finished()

    gen.expect(3)
    out = await asyncio.gather(episode(0, 2), episode(10, 3), episode(20, 1))
    assert out[0] == [0, 1, 1, 2, 2]
    assert out[1] == [10, 11, 11, 12, 12, 13, 13]
    assert calls == [3, 2, 1]  # all three, then the two left, then the last
    assert gen.stats.sequences == 6 and gen.stats.new_tokens == 12


async def test_a_failed_batch_fails_its_requests() -> None:
    def broken(contexts: list[list[int]], n: int) -> list[list[int]]:
        raise RuntimeError("CUDA out of memory")

    gen = BatchedGenerator(broken)
    gen.expect(1)
    try:
        await gen.generate([1], 4)
    except RuntimeError as exc:
        assert "out of memory" in str(exc)
    else:
        raise AssertionError("no error")


async def test_max_new_tokens_is_per_request() -> None:
    calls: list[int] = []
    gen = BatchedGenerator(echo_batch(calls))
    gen.expect(2)
    a, b = await asyncio.gather(gen.generate([1], 1), gen.generate([5], 3))
    assert a == [2] and b == [6, 6, 6] and calls == [2]
