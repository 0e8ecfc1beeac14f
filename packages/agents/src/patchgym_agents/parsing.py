"""Reading a model reply as one tool call, or saying precisely what was wrong with it.

Two formats: the text form ``<function=NAME><parameter=KEY>VALUE</parameter></function>``
(R2E-Gym, SWE-agent's XML style) and OpenAI-style native tool calls (JSON arguments).

Rules, the same for both:
- ``<think>...</think>`` blocks are stripped (their text becomes the step's ``thought``);
  so is a leading block that only has its closing tag (chat templates that open
  ``<think>`` in the prompt).
- Text before or after the call is allowed (it is the model's commentary).
- Several calls in one reply: the first runs, the count of the rest is reported.
- A missing ``</function>`` at the very end is accepted (servers often stop on it).
- Anything else that prevents a clean reading is a :class:`ParseResult` with ``error``
  set — a message for the model, never an exception.
- Bounded: parsing is linear in the reply's length (no regex rescans, no recursion); a
  reply whose visible text (thoughts aside) is over ``max_chars`` (64 KiB by default) or
  whose JSON arguments nest deeper than ``max_depth`` is an error naming the limit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from patchgym_agents.envs_api import (
    FUNC_OPEN as _FUNC_OPEN,
)
from patchgym_agents.envs_api import (
    MAX_ACTION_BYTES,
    MAX_ACTION_DEPTH,
    ActionInvalid,
    ToolCall,
    check_value,
    loads_json,
    split_think,
)
from patchgym_agents.envs_api import (
    PARAM_OPEN as _PARAM_OPEN,
)

_FUNC_CLOSE = "</function>"
_PARAM_CLOSE = "</parameter>"
_NAME = re.compile(r"^[A-Za-z_][\w.\-]*$")

FORMAT_HINT = (
    "Call exactly one tool per reply, in this format:\n"
    "<function=TOOL_NAME>\n<parameter=PARAM_NAME>value</parameter>\n</function>"
)


class ParseResult(BaseModel):
    """The first tool call of a reply, or the reason there is none."""

    call: ToolCall | None = None
    error: str | None = None
    thought: str = ""
    extra_calls: int = 0
    notes: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.call is not None and self.error is None


def split_thinking(text: str) -> tuple[str, str, str | None]:
    """``(visible_text, thought, error)`` with every ``<think>`` block removed."""
    thoughts: list[str] = []
    first_close = text.find("</think>")
    if first_close >= 0 and text.find("<think>", 0, first_close) < 0:
        thoughts.append(text[:first_close].strip())
        text = text[first_close + len("</think>") :]
    visible, closed, unclosed = split_think(text)
    thoughts.extend(t.strip() for t in closed)
    error = None
    if unclosed is not None:
        thoughts.append(unclosed.strip())
        error = (
            "your reply ended inside a <think> block (no </think>), so no tool call was read; "
            "close your reasoning with </think> and then call a tool"
        )
    return visible, "\n\n".join(t for t in thoughts if t), error


def _check_name(name: str, tool_names: Collection[str] | None) -> str | None:
    if not _NAME.match(name):
        return f"{name!r} is not a valid tool name"
    if tool_names is not None and name not in tool_names:
        return f"unknown tool {name!r}; available tools: {', '.join(tool_names)}"
    return None


def _parse_params(body: str, fname: str) -> tuple[dict[str, Any], str | None, list[str]]:
    args: dict[str, Any] = {}
    notes: list[str] = []
    pos = 0
    while (m := _PARAM_OPEN.search(body, pos)) is not None:
        if body[pos : m.start()].strip():
            notes.append(f"ignored text between parameters of {fname}")
        key = m.group(1).strip()
        end = body.find(_PARAM_CLOSE, m.end())
        nxt = _PARAM_OPEN.search(body, m.end())
        if end < 0 or (nxt is not None and nxt.start() < end):
            return args, f"parameter {key!r} of {fname} is not closed with </parameter>", notes
        if not _NAME.match(key):
            return args, f"{key!r} is not a valid parameter name (in {fname})", notes
        if key in args:
            return args, f"parameter {key!r} is given twice in {fname}", notes
        value = body[m.end() : end]
        value = value.removeprefix("\n").removesuffix("\n")
        args[key] = value
        pos = end + len(_PARAM_CLOSE)
    if _PARAM_CLOSE in body[pos:]:
        return args, f"a </parameter> in {fname} has no matching <parameter=NAME>", notes
    return args, None, notes


def _too_large(value: Any, max_chars: int, max_depth: int) -> str | None:
    try:
        check_value(value, max_bytes=max_chars, max_depth=max_depth, what="tool call")
    except ActionInvalid as exc:
        return str(exc)
    return None


def parse_text(
    text: str,
    tool_names: Collection[str] | None = None,
    *,
    max_chars: int = MAX_ACTION_BYTES,
) -> ParseResult:
    """Read the first ``<function=...>`` call of ``text``."""
    visible, thought, think_error = split_thinking(text)
    if (err := _too_large(visible, max_chars, MAX_ACTION_DEPTH)) is not None:
        return ParseResult(error=err, thought=thought)
    opens = list(_FUNC_OPEN.finditer(visible))
    if not opens:
        error = think_error or f"no tool call found in your reply. {FORMAT_HINT}"
        return ParseResult(error=error, thought=thought or visible.strip())
    first = opens[0]
    name = first.group(1).strip()
    pre = visible[: first.start()].strip()
    thought = "\n\n".join(t for t in (thought, pre) if t)
    result = ParseResult(thought=thought, extra_calls=len(opens) - 1)
    if result.extra_calls:
        result.notes.append(
            f"{result.extra_calls} more tool call(s) in the same reply were ignored; "
            "only the first one ran"
        )
    stop = opens[1].start() if len(opens) > 1 else len(visible)
    close = visible.find(_FUNC_CLOSE, first.end(), stop)
    if close < 0:
        if len(opens) > 1:
            result.error = f"<function={name}> is not closed with </function> before the next call"
            return result
        result.notes.append("missing </function> at the end of the reply was accepted")
        close = stop
    if (err := _check_name(name, tool_names)) is not None:
        result.error = err
        return result
    args, err, notes = _parse_params(visible[first.end() : close], name)
    result.notes.extend(notes)
    if err is not None:
        result.error = err
        return result
    result.call = ToolCall(name=name, arguments=args)
    return result


def _tool_call_parts(raw: Mapping[str, Any]) -> tuple[str, Any, str | None]:
    fn = raw.get("function", raw)
    if not isinstance(fn, Mapping):
        return "", None, None
    call_id = raw.get("id")
    return (
        str(fn.get("name") or ""),
        fn.get("arguments", {}),
        call_id if isinstance(call_id, str) else None,
    )


def parse_tool_calls(
    tool_calls: Sequence[Mapping[str, Any]],
    content: str = "",
    tool_names: Collection[str] | None = None,
    *,
    max_chars: int = MAX_ACTION_BYTES,
    max_depth: int = MAX_ACTION_DEPTH,
) -> ParseResult:
    """Read the first native (OpenAI) tool call; fall back to the text form in ``content``."""
    visible, thought, _ = split_thinking(content or "")
    if not tool_calls:
        if _FUNC_OPEN.search(visible):
            res = parse_text(content, tool_names, max_chars=max_chars)
            res.notes.append("no native tool call; read the <function=...> text form instead")
            return res
        return ParseResult(
            error="no tool call in your reply; call one of the provided tools (function calling)",
            thought=thought or visible.strip(),
        )
    name, raw_args, call_id = _tool_call_parts(tool_calls[0])
    thought = "\n\n".join(t for t in (thought, visible.strip()) if t)
    result = ParseResult(thought=thought, extra_calls=len(tool_calls) - 1)
    if result.extra_calls:
        result.notes.append(
            f"{result.extra_calls} more tool call(s) in the same reply were ignored; "
            "only the first one ran"
        )
    if not name:
        result.error = "a tool call has no function name"
        return result
    if (err := _check_name(name, tool_names)) is not None:
        result.error = err
        return result
    if (err := _too_large(raw_args, max_chars, max_depth)) is not None:
        result.error = err
        return result
    args: Any = raw_args
    if isinstance(raw_args, str):
        if not raw_args.strip():
            args = {}
        else:
            try:
                args = loads_json(raw_args)
            except ValueError as exc:
                why = (
                    f"{exc.msg} at character {exc.pos}"
                    if isinstance(exc, json.JSONDecodeError)
                    else str(exc)
                )
                result.error = (
                    f"the arguments of your {name} call are not valid JSON ({why}); "
                    'send a JSON object such as {"path": "/testbed"}'
                )
                return result
            if (err := _too_large(args, max_chars, max_depth)) is not None:
                result.error = err
                return result
    if not isinstance(args, Mapping):
        result.error = (
            f"the arguments of your {name} call must be a JSON object, got {type(args).__name__}"
        )
        return result
    result.call = ToolCall(name=name, arguments=dict(args), id=call_id)
    return result
