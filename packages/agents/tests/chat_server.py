"""A tiny OpenAI-compatible chat server for tests: scripted completions over real HTTP.

Each script entry is a reply message (``{"content": ..., "tool_calls": [...]}``) or an
HTTP error status (``429``, ``500``, ...). Every request body is recorded.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from patchgym_agents.testing import JsonServer

Entry = dict[str, Any] | int | str
"""A reply message, an HTTP error status, or ``"context"`` (vLLM's 400 for a too-long prompt)."""


class ChatServer(JsonServer):
    def __init__(self, script: list[Entry]) -> None:
        super().__init__()
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def respond(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if path.rstrip("/") != "/v1/chat/completions":
            return 404, {"error": {"message": f"no route {path}"}}
        with self.lock:
            self.requests.append(body)
            entry = self.script.pop(0) if self.script else 400
        if entry == "context":
            msg = (
                "This model's maximum context length is 32768 tokens. However, you "
                "requested 40000 tokens. Please reduce the length of the messages."
            )
            return 400, {"error": {"message": msg, "type": "BadRequestError"}}
        if not isinstance(entry, dict):
            status = entry if isinstance(entry, int) else 500
            msg = "slow down" if status == 429 else "scripted failure"
            return status, {"error": {"message": msg, "type": "test"}}
        n = len(self.requests)
        message = {"role": "assistant", "content": entry.get("content")}
        if entry.get("tool_calls"):
            message["tool_calls"] = entry["tool_calls"]
        finish = "tool_calls" if entry.get("tool_calls") else "stop"
        return 200, {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "test"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": 100 * n,
                "completion_tokens": 10,
                "total_tokens": 100 * n + 10,
            },
        }


def tool_call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
