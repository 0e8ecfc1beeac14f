"""The session buffer keeps head and tail, counts what it dropped, and searches only new text."""

from __future__ import annotations

import asyncio
import re

from patchgym_sandbox.session import ShellChannel
from patchgym_sandbox.sessionbuf import SessionBuffer

MARK = re.compile(r"\n?__END_(\d+)__\n")


def test_marker_split_across_chunks_is_found() -> None:
    buf = SessionBuffer(head=8, tail=64, overlap=16)
    assert buf.feed("hello\n__EN", MARK) is None
    m = buf.feed("D_7__\nrest", MARK)
    assert m is not None and m.group(1) == "7"
    assert buf.take(m.start(), skip=m.end() - m.start()) == "hello"
    assert buf.take_all() == "rest"


def test_output_past_the_cap_keeps_head_and_tail_and_counts() -> None:
    buf = SessionBuffer(head=10, tail=100, overlap=16)
    buf.feed("H" * 10, MARK)
    for _ in range(1000):
        assert buf.feed("x" * 50, MARK) is None
    assert len(buf) <= 10 + 100 + 50
    m = buf.feed("tail\n__END_0__\n", MARK)
    assert m is not None
    out = buf.take(m.start(), skip=m.end() - m.start())
    assert out.startswith("H" * 10) and out.endswith("tail")
    note = re.search(r"\[\.\.\. (\d+) characters of output dropped \.\.\.\]", out)
    assert note is not None
    assert int(note.group(1)) + out.count("x") == 1000 * 50


def test_search_cost_does_not_grow_with_output() -> None:
    """Each chunk is searched with at most the overlap before it (counted, not timed)."""
    searched: list[int] = []

    class Counting:
        pattern, flags = "(?:no literal hint)", 0  # searched on every chunk

        def search(self, text: str, pos: int = 0) -> re.Match[str] | None:
            searched.append(len(text) - pos)
            return MARK.search(text, pos)

    buf = SessionBuffer(head=64, tail=4096, overlap=32)
    for _ in range(5000):
        buf.feed("y\n" * 64, Counting())  # type: ignore[arg-type]
    assert max(searched) <= 32 + 128


def test_channel_queue_is_bounded_and_says_what_it_dropped() -> None:
    class Chan(ShellChannel):
        max_queued_bytes = 1000

        async def write(self, data: bytes) -> None: ...

        async def close(self) -> None: ...

    async def main() -> None:
        chan = Chan()
        chan.feed(b"head")
        for _ in range(10_000):
            chan.feed(b"z" * 100)
        chan.feed(b"last")
        first = await chan.read()
        assert b"bytes of output dropped" in first
        assert first.startswith(b"head\n[..."), "the head of the flood was dropped"
        rest = [first]
        while chunk := (await chan.read() if chan._chunks else b""):
            rest.append(chunk)
        assert rest[-1] == b"last" and sum(len(c) for c in rest) < 2000

    asyncio.run(main())
