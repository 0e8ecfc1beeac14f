"""An OpenAI-compatible server that plays a scripted policy per task, over real HTTP.

Many episodes run at once through rLLM's engines, so one global queue of replies would
interleave. Each request is matched to its task by the problem statement it contains,
and the turn by the number of assistant turns already in it; the reply is that task's
script entry for the turn, or the task's fallback once the script is spent. Serves
``/v1/chat/completions`` (rLLM's ``OpenAIEngine`` without a tokenizer) and
``/v1/completions`` (with one: the prompt is ChatML text).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from patchgym_agents.testing import JsonServer

NOOP = "<function=execute_bash>\n<parameter=cmd>\ntrue\n</parameter>\n</function>"


@dataclass
class Script:
    marker: str
    """Text unique to this task's prompt (its problem statement)."""
    replies: list[str]
    fallback: str = NOOP
    served: list[int] = field(default_factory=list)


class PolicyServer(JsonServer):
    def __init__(self, scripts: list[Script]) -> None:
        super().__init__()
        self.scripts = scripts
        self.lock = threading.Lock()
        self.requests = 0

    def respond(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        route = path.rstrip("/")
        if route == "/v1/chat/completions":
            msgs = body.get("messages") or []
            text = "\n".join(str(m.get("content") or "") for m in msgs)
            turn = sum(1 for m in msgs if m.get("role") == "assistant")
        elif route == "/v1/completions":
            text = str(body.get("prompt") or "")
            turn = text.count("<|im_start|>assistant") - 1
        else:
            return 404, {"error": {"message": f"no route {path}"}}
        reply = self.reply(text, turn)
        if reply is None:
            return 400, {"error": {"message": "no script matches this prompt"}}
        usage = {"prompt_tokens": len(text) // 4, "completion_tokens": len(reply) // 4}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if route == "/v1/completions":
            choice: dict[str, Any] = {"index": 0, "text": reply, "finish_reason": "stop"}
            obj = "text_completion"
        else:
            message = {"role": "assistant", "content": reply}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            obj = "chat.completion"
        return 200, {
            "id": f"cmpl-{self.requests}",
            "object": obj,
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [choice],
            "usage": usage,
        }

    def reply(self, text: str, turn: int) -> str | None:
        with self.lock:
            self.requests += 1
            for s in self.scripts:
                if s.marker in text:
                    s.served.append(turn)
                    return s.replies[turn] if 0 <= turn < len(s.replies) else s.fallback
        return None
