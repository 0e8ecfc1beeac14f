"""An OpenAI-compatible server that plays a scripted policy per task, over real HTTP.

Many episodes run at once through rLLM's engines, so one global queue of replies would
interleave. Each request is matched to its task by the problem statement it contains,
and the turn by the number of assistant turns already in it; the reply is that task's
script entry for the turn, or the task's fallback once the script is spent. Serves
``/v1/chat/completions`` (rLLM's ``OpenAIEngine`` without a tokenizer) and
``/v1/completions`` (with one: the prompt is ChatML text).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

NOOP = "<function=execute_bash>\n<parameter=cmd>\ntrue\n</parameter>\n</function>"


@dataclass
class Script:
    marker: str
    """Text unique to this task's prompt (its problem statement)."""
    replies: list[str]
    fallback: str = NOOP
    served: list[int] = field(default_factory=list)


class PolicyServer:
    def __init__(self, scripts: list[Script]) -> None:
        self.scripts = scripts
        self.lock = threading.Lock()
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                route = self.path.rstrip("/")
                if route == "/v1/chat/completions":
                    msgs = body.get("messages") or []
                    text = "\n".join(str(m.get("content") or "") for m in msgs)
                    turn = sum(1 for m in msgs if m.get("role") == "assistant")
                elif route == "/v1/completions":
                    text = str(body.get("prompt") or "")
                    turn = text.count("<|im_start|>assistant") - 1
                else:
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                reply = server.reply(text, turn)
                if reply is None:
                    return self._send(400, {"error": {"message": "no script matches this prompt"}})
                usage = {"prompt_tokens": len(text) // 4, "completion_tokens": len(reply) // 4}
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                if route == "/v1/completions":
                    choice: dict[str, Any] = {"index": 0, "text": reply, "finish_reason": "stop"}
                    obj = "text_completion"
                else:
                    message = {"role": "assistant", "content": reply}
                    choice = {"index": 0, "message": message, "finish_reason": "stop"}
                    obj = "chat.completion"
                self._send(
                    200,
                    {
                        "id": f"cmpl-{server.requests}",
                        "object": obj,
                        "created": int(time.time()),
                        "model": body.get("model", "scripted"),
                        "choices": [choice],
                        "usage": usage,
                    },
                )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def reply(self, text: str, turn: int) -> str | None:
        with self.lock:
            self.requests += 1
            for s in self.scripts:
                if s.marker in text:
                    s.served.append(turn)
                    return s.replies[turn] if 0 <= turn < len(s.replies) else s.fallback
        return None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> PolicyServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
