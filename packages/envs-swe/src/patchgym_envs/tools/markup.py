"""Linear-time pieces for reading actions a hostile policy wrote.

Every function here runs in time linear in its input, whatever the input holds (no
regular expression with an unbounded scan per candidate position, no recursion), so a
50 MB action costs a bounded fraction of a second, not minutes. The limits below are the
defaults of ``EnvConfig.max_action_bytes`` / ``max_action_depth``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

MAX_ACTION_BYTES = 64 * 1024
"""Default largest action (text, or the sum of a tool call's names and values) accepted."""
MAX_ACTION_DEPTH = 32
"""Default deepest nesting of JSON arrays/objects in an action's arguments."""
MAX_NAME = 256
"""Longest tool or parameter name scanned for; longer names are not names."""

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
FUNC_OPEN = re.compile(r"<function\s{0,8}=\s{0,8}([^>\n]{0,256})>")
PARAM_OPEN = re.compile(r"<parameter\s{0,8}=\s{0,8}([^>\n]{0,256})>")


class ActionInvalid(ValueError):
    """An action the environment refuses before running it (the message says why)."""


class ActionTooLarge(ActionInvalid):
    """An action over the size or nesting limit (the message states the limit)."""


class ActionNotText(ActionInvalid):
    """An action holding text that is not encodable as UTF-8 (a lone surrogate)."""


def split_think(text: str) -> tuple[str, list[str], str | None]:
    """``(visible, closed_thoughts, unclosed)``: every ``<think>...</think>`` pair removed.

    ``unclosed`` is the text after the first ``<think>`` that has no ``</think>`` (None
    when every block is closed); it is not part of ``visible``.
    """
    visible: list[str] = []
    thoughts: list[str] = []
    pos = 0
    while True:
        i = text.find(THINK_OPEN, pos)
        if i < 0:
            visible.append(text[pos:])
            return "".join(visible), thoughts, None
        j = text.find(THINK_CLOSE, i + len(THINK_OPEN))
        visible.append(text[pos:i])
        if j < 0:
            return "".join(visible), thoughts, text[i + len(THINK_OPEN) :]
        thoughts.append(text[i + len(THINK_OPEN) : j])
        pos = j + len(THINK_CLOSE)


def loads_json(text: str) -> Any:
    """``json.loads`` where too-deep nesting is a ``ValueError`` too (never ``RecursionError``)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def _children(value: Any) -> Iterator[Any]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield k
            yield v
    elif isinstance(value, (list, tuple)):
        yield from value


def check_value(value: Any, *, max_bytes: int, max_depth: int, what: str = "action") -> None:
    """Raise :class:`ActionTooLarge` if ``value`` (text, or nested data) is over a limit.

    Text that cannot be encoded as UTF-8 (a lone surrogate, which no tokenizer emits but
    a hostile or broken client can send) raises :class:`ActionNotText`: no command, file
    or log downstream could carry it.

    Iterative, and stops as soon as a limit is crossed, so the cost is bounded by the
    limits rather than by the value.
    """
    total = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            raise ActionTooLarge(
                f"the {what} is nested more than {max_depth} levels deep; send flat arguments"
            )
        if isinstance(item, str):
            if item.isascii():
                total += len(item)
            else:
                try:
                    total += len(item.encode("utf-8"))
                except UnicodeEncodeError as exc:
                    raise ActionNotText(
                        f"the {what} holds text that is not valid UTF-8 "
                        f"({exc.reason} at character {exc.start}); send plain text"
                    ) from None
        elif isinstance(item, (bytes, bytearray)):
            total += len(item)
        elif isinstance(item, (Mapping, list, tuple)):
            stack.extend((c, depth + 1) for c in _children(item))
        else:
            total += 8
        if total > max_bytes:
            raise ActionTooLarge(
                f"the {what} is over the {max_bytes}-byte limit of one action "
                f"({max_bytes // 1024} KiB); split the work into smaller steps "
                "(e.g. write a large file in parts)"
            )
