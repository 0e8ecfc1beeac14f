"""Bounded, incrementally searched output of an interactive session.

A process in the sandbox may print forever (``yes`` under a debugger). The driver must
neither hold all of it nor rescan it: :class:`SessionBuffer` keeps the head and the tail
of what was not consumed yet and counts what it dropped between them, and a search for a
prompt or end marker looks only at the new text plus an ``overlap`` of the old (a marker
split across two chunks is still found), so each chunk costs time in its own size.
"""

from __future__ import annotations

import functools
import re
from collections import deque

HEAD_CHARS = 64 * 1024
TAIL_CHARS = 256 * 1024
OVERLAP_CHARS = 256
"""Longest prompt or marker a search must find across a chunk boundary."""


_META = frozenset(".^$*+?{}[]|()")


@functools.lru_cache(maxsize=256)
def needle(source: str, flags: int = 0) -> str:
    """A literal every match of the regex ``source`` contains ("" when unsure): a fast
    ``in`` test skips the regex on chunks that cannot hold a match."""
    if "|" in source or flags & (re.IGNORECASE | re.VERBOSE):
        return ""
    text = source.removeprefix("\\n?")
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and not text[i + 1].isalnum():
            out.append(text[i + 1])
            i += 2
        elif c == "\\" or c in _META:
            break
        else:
            out.append(c)
            i += 1
    if i < len(text) and text[i] in "*?{" and out:
        out.pop()  # a quantifier makes the last character optional
    return "".join(out)


def dropped_note(n: int) -> str:
    return f"\n[... {n} characters of output dropped ...]\n"


class SessionBuffer:
    """Unconsumed session output: head and tail kept, the middle counted in ``dropped``."""

    def __init__(
        self, *, head: int = HEAD_CHARS, tail: int = TAIL_CHARS, overlap: int = OVERLAP_CHARS
    ) -> None:
        if tail < overlap:
            raise ValueError(f"tail ({tail}) must hold at least the overlap ({overlap})")
        self._head_max, self._tail_max, self._overlap = head, tail, overlap
        self._head = ""
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self.dropped = 0
        self._window = ""
        """The last ``overlap`` characters already searched."""

    def __len__(self) -> int:
        return len(self._head) + self._tail_len

    def kept(self) -> str:
        """Head and tail, joined (the cut, if any, lies at ``len(head)``)."""
        joined = "".join(self._tail)
        self._tail = deque([joined]) if joined else deque()
        return self._head + joined

    def _append(self, text: str, *, trim: bool) -> None:
        if not self.dropped and not self._tail and len(self._head) < self._head_max:
            room = self._head_max - len(self._head)
            self._head += text[:room]
            text = text[room:]
        if text:
            self._tail.append(text)
            self._tail_len += len(text)
        while trim and self._tail_len > self._tail_max:
            excess = self._tail_len - self._tail_max
            first = self._tail[0]
            if len(first) <= excess:
                self._tail.popleft()
            else:
                self._tail[0] = first[excess:]
            cut = min(len(first), excess)
            self._tail_len -= cut
            self.dropped += cut

    def feed(self, chunk: str, pattern: re.Pattern[str] | None = None) -> re.Match[str] | None:
        """Add ``chunk``; with ``pattern``, search only the chunk and the overlap before it.

        A match is returned against :meth:`kept` (positions usable with :meth:`take`).
        """
        window = self._window
        hit = None
        if pattern is not None:
            text = window + chunk
            lit = needle(pattern.pattern, pattern.flags)
            hit = pattern.search(text) if not lit or lit in text else None
        before = len(self)
        self._append(chunk, trim=hit is None)
        self._window = (window + chunk)[-self._overlap :]
        if hit is None or pattern is None:
            return None
        return pattern.search(self.kept(), before - len(window))

    def search(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        """A full search of what is kept (once per wait: leftovers from an earlier read)."""
        return pattern.search(self.kept())

    def take(self, end: int, *, skip: int = 0) -> str:
        """Consume kept text up to ``end`` (returned) and ``skip`` characters more.

        The note of dropped output stands where the output was dropped (in what is
        returned, or at the start of what stays when ``end`` lies before the cut).
        """
        text, cut = self.kept(), len(self._head)
        if self.dropped:
            note = dropped_note(self.dropped)
            text = text[:cut] + note + text[cut:]
            end += len(note) if end >= cut else 0
        out = text[:end]
        self._reset(text[end + skip :])
        return out

    def take_all(self) -> str:
        return self.take(len(self))

    def _reset(self, rest: str) -> None:
        self._head, self._tail, self._tail_len, self.dropped = "", deque(), 0, 0
        self._append(rest, trim=True)
        self._window = rest[-self._overlap :]
