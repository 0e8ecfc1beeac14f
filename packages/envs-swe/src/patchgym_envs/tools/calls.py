"""The action the environment executes: a tool call, from whatever the agent handed over.

Accepted: a :class:`ToolCall`; an object with ``.action`` (rLLM's ``Action``), unwrapped;
an object with ``function_name`` / ``parameters`` (R2E-Gym's ``Action``); an OpenAI tool
call (``{"name", "arguments"}`` or ``{"function": {...}}``, arguments as JSON text or a
mapping); or text in the ``<function=NAME><parameter=KEY>VALUE</parameter></function>``
format. The agents package has the thorough parser; this one is enough for the contract.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from patchgym_envs.tools.markup import FUNC_OPEN, PARAM_OPEN, THINK_OPEN, loads_json, split_think


class ActionParseError(ValueError):
    """The action could not be read as a tool call (shown to the model)."""


class ToolCall(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


def parse_text(text: str) -> ToolCall:
    """Read the first ``<function=...>`` block of ``text`` (linear time, see ``markup``)."""
    visible, _, unclosed = split_think(text)
    if unclosed is not None:
        visible += THINK_OPEN + unclosed
    m = FUNC_OPEN.search(visible)
    name = m.group(1).strip() if m is not None else ""
    if m is None or not name or any(c.isspace() for c in name):
        raise ActionParseError(
            "no tool call found; call a tool as "
            "<function=NAME>\n<parameter=KEY>VALUE</parameter>\n</function>"
        )
    end = visible.find("</function>", m.end())
    body = visible[m.end() : end if end >= 0 else len(visible)]
    args: dict[str, Any] = {}
    pos = 0
    while (pm := PARAM_OPEN.search(body, pos)) is not None:
        close = body.find("</parameter>", pm.end())
        if close < 0:
            break
        value = body[pm.end() : close].removeprefix("\n").removesuffix("\n")
        args[pm.group(1).strip()] = value
        pos = close + len("</parameter>")
    return ToolCall(name=name, arguments=args)


def to_tool_call(action: Any) -> ToolCall:
    """Normalise any accepted action form to a :class:`ToolCall` (or ActionParseError)."""
    seen = 0
    while hasattr(action, "action") and not isinstance(action, (str, Mapping)) and seen < 4:
        action = action.action
        seen += 1
    if isinstance(action, ToolCall):
        return action
    if isinstance(action, str):
        return parse_text(action)
    if isinstance(action, Mapping):
        fn = action.get("function", action)
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            raw = fn.get("arguments", fn.get("parameters", {}))
            if isinstance(raw, str):
                try:
                    raw = loads_json(raw) if raw.strip() else {}
                except ValueError as exc:
                    msg = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
                    raise ActionParseError(
                        f"tool call arguments are not valid JSON: {msg}"
                    ) from None
            if not isinstance(raw, Mapping):
                raise ActionParseError("tool call arguments must be a JSON object")
            call_id = action.get("id")
            return ToolCall(
                name=fn["name"],
                arguments=dict(raw),
                id=call_id if isinstance(call_id, str) else None,
            )
    name = getattr(action, "function_name", None)
    if isinstance(name, str):
        params = getattr(action, "parameters", None) or {}
        return ToolCall(name=name, arguments=dict(params))
    raise ActionParseError(f"cannot read an action of type {type(action).__name__} as a tool call")
