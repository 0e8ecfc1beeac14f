"""End to end on CPU: a tiny random model behind an OpenAI-compatible server, `patchgym rollout`.

1. build a random-weight Qwen2 (a few million parameters) with a byte-level BPE tokenizer
   trained here (``patchgym_trainer.testing.tiny_model``; nothing downloaded);
2. serve it with a minimal OpenAI-compatible server (``/v1/models``,
   ``/v1/chat/completions``; transformers ``generate`` on CPU, one request at a time);
3. run ``patchgym rollout`` against it for two bundled tasks on the local backend, through
   the real ``openai`` client, and check that every episode finished without an
   infrastructure error and that the report was written.

    python apps/trainer/scripts/e2e_cpu.py [--out DIR] [--tasks 2] [--steps 3]

Prints a timing line per phase and exits non-zero on failure. Needs the trainer's
``cpu`` extra (torch, transformers).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class TinyChatServer:
    """OpenAI chat completions over a local transformers model (greedy or sampled)."""

    def __init__(self, model_dir: Path, name: str = "tiny-qwen") -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.name = name
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model: Any = AutoModelForCausalLM.from_pretrained(model_dir)
        self.model.eval()
        self.lock = threading.Lock()
        self.requests = 0

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 64)
        temperature = float(body.get("temperature") or 0.0)
        ids = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=False
        )
        prompt = self.torch.tensor([list(ids)])
        with self.lock, self.torch.no_grad():
            self.requests += 1
            out = self.model.generate(
                prompt,
                attention_mask=self.torch.ones_like(prompt),
                max_new_tokens=max_tokens,
                do_sample=temperature > 0,
                temperature=temperature if temperature > 0 else None,
                top_p=None,
                top_k=None,
            )
        new = out[0, prompt.shape[1] :].tolist()
        eos = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        finish = "stop" if eos in new else "length"
        if eos in new:
            new = new[: new.index(eos)]
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": prompt.shape[1],
                "completion_tokens": len(new),
                "total_tokens": prompt.shape[1] + len(new),
            },
        }

    def serve(self, port: int = 0) -> ThreadingHTTPServer:
        chat = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, code: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(
                        200,
                        {
                            "object": "list",
                            "data": [{"id": chat.name, "object": "model", "owned_by": "patchgym"}],
                        },
                    )
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                try:
                    self._send(200, chat.complete(body))
                except Exception as exc:  # report to the client as an API error
                    self._send(500, {"error": {"message": f"{type(exc).__name__}: {exc}"}})

        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=48)
    args = ap.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="patchgym-e2e-cpu-"))
    timings: dict[str, float] = {}

    t0 = time.monotonic()
    from patchgym_trainer.testing.tiny_model import build_tiny_model

    model_dir = build_tiny_model(out / "tiny-qwen")
    timings["build_model_s"] = time.monotonic() - t0

    t0 = time.monotonic()
    chat = TinyChatServer(model_dir)
    server = chat.serve()
    base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    timings["server_ready_s"] = time.monotonic() - t0

    t0 = time.monotonic()
    cmd = [
        sys.executable, "-m", "patchgym_trainer", "rollout",
        f"dataset.limit={args.tasks}",
        f"rollout.base_url={base_url}",
        "rollout.samples=1",
        "rollout.temperature=0.8",
        f"rollout.max_tokens={args.max_tokens}",
        f"env.max_steps={args.steps}",
        "--out", str(out / "rollout"),
    ]  # fmt: skip
    print("$", " ".join(cmd), flush=True)
    code = subprocess.call(cmd)
    timings["rollout_s"] = time.monotonic() - t0
    server.shutdown()

    summary_path = out / "rollout" / "summary.json"
    ok = code == 0 and summary_path.is_file() and (out / "rollout" / "report.html").is_file()
    if ok:
        summary = json.loads(summary_path.read_text())
        ok = summary["finished"] == args.tasks and summary["infra_failed"] == 0
        print(
            f"episodes {summary['finished']}/{summary['episodes']}, infra {summary['infra_failed']}, "
            f"model steps {summary['model_steps']}, format errors {summary['format_errors']}, "
            f"tokens {summary['prompt_tokens']}+{summary['completion_tokens']}, "
            f"server requests {chat.requests}"
        )
    print("timings: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    print(f"e2e_cpu {'PASSED' if ok else 'FAILED'} ({out})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
