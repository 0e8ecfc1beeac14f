"""OpenAIPolicy through the real ``openai`` client against a scripted HTTP server."""

from __future__ import annotations

from typing import Any

from chat_server import ChatServer, tool_call

from patchgym_agents import OpenAIPolicy, run_episode
from patchgym_agents.envs_api import bundled_task
from patchgym_sandbox import SandboxBackend

PATH = "/testbed/romanum/convert.py"
OLD = '    (1000, "M"),\n'
NEW = '    (1000, "M"),\n    (900, "CM"),\n'


def policy(server: ChatServer, **kw: Any) -> OpenAIPolicy:
    return OpenAIPolicy(
        "test-model",
        base_url=server.base_url,
        sampling={"temperature": 0.2, "max_tokens": 512, "stop": ["</function>"]},
        backoff_s=0.01,
        model_timeout_s=30,
        **kw,
    )


async def test_native_tool_calls_with_retries(backend: SandboxBackend) -> None:
    script: list[Any] = [
        429,
        {
            "content": "Let me look.",
            "tool_calls": [
                tool_call("c1", "str_replace_editor", {"command": "view", "path": PATH})
            ],
        },
        500,
        {
            "content": None,
            "tool_calls": [
                tool_call(
                    "c2",
                    "str_replace_editor",
                    {"command": "str_replace", "path": PATH, "old_str": OLD, "new_str": NEW},
                )
            ],
        },
        {"content": None, "tool_calls": [tool_call("c3", "submit", {})]},
    ]
    with ChatServer(script) as server:
        p = policy(server)
        try:
            res = await run_episode(
                bundled_task("romanum"), p, env={"scaffold": "sweagent"}, backend=backend
            )
        finally:
            await p.aclose()
    assert res.status == "graded" and res.resolved, res
    assert len(server.requests) == 5 and res.model_steps == 3
    first, last = server.requests[0], server.requests[-1]
    assert (
        first["model"] == "test-model"
        and first["temperature"] == 0.2
        and first["max_tokens"] == 512
    )
    assert [t["function"]["name"] for t in first["tools"]] == [
        "str_replace_editor",
        "execute_bash",
        "submit",
    ]
    roles = [m["role"] for m in last["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert last["messages"][2]["tool_calls"][0]["id"] == "c1"
    assert (
        last["messages"][3]["tool_call_id"] == "c1" and "cat -n" in last["messages"][3]["content"]
    )
    assert res.usage.prompt_tokens == 200 + 400 + 500 and res.usage.completion_tokens == 30


async def test_text_format_through_openai(backend: SandboxBackend) -> None:
    fix = (
        "<function=file_editor>\n<parameter=command>str_replace</parameter>\n"
        f"<parameter=path>{PATH}</parameter>\n<parameter=old_str>\n{OLD}</parameter>\n"
        f"<parameter=new_str>\n{NEW}</parameter>\n"
    )  # no </function>: the server stopped on it
    script: list[Any] = [
        {"content": "<think>the table lacks 900</think>I'll edit the table."},  # malformed
        {"content": fix},
        {"content": "<function=finish>\n<parameter=command>submit</parameter>\n</function>"},
    ]
    with ChatServer(script) as server:
        p = policy(server)
        try:
            res = await run_episode(
                bundled_task("romanum"), p, env={"scaffold": "r2egym"}, backend=backend
            )
        finally:
            await p.aclose()
    assert res.status == "graded" and res.resolved, res
    assert res.format_errors == 1
    assert "tools" not in server.requests[0]
    assert "BEGIN FUNCTION: file_editor" in server.requests[0]["messages"][0]["content"]
    assert server.requests[1]["messages"][-1]["content"].startswith("ERROR: no tool call found")


async def test_context_overflow_ends_and_grades(backend: SandboxBackend) -> None:
    edit = tool_call(
        "c1",
        "str_replace_editor",
        {"command": "str_replace", "path": PATH, "old_str": OLD, "new_str": NEW},
    )
    script: list[Any] = [{"content": None, "tool_calls": [edit]}, "context"]
    with ChatServer(script) as server:
        p = policy(server)
        res = await run_episode(
            bundled_task("romanum"), p, env={"scaffold": "sweagent"}, backend=backend
        )
        await p.aclose()
    assert res.status == "graded" and res.done_reason == "context_exceeded", res
    assert res.resolved is True and res.steps == 1


async def test_refused_request_and_unavailable_endpoint(backend: SandboxBackend) -> None:
    with ChatServer([400]) as server:
        p = policy(server)
        res = await run_episode(bundled_task("romanum"), p, backend=backend)
        await p.aclose()
    assert (
        res.status == "error" and res.error is not None and "refused the request (400)" in res.error
    )
    with ChatServer([503, 503, 503]) as server:
        p = policy(server, max_retries=2)
        res = await run_episode(bundled_task("romanum"), p, backend=backend)
        await p.aclose()
    assert res.status == "infra_error" and res.infra_error is not None
    assert "PolicyUnavailable" in res.infra_error and len(server.requests) == 3
