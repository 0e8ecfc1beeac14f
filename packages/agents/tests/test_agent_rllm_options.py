"""rLLM's ``SWEAgent`` arguments: use_fn_calling, format_model_response, prompts="rllm".

The rLLM prompts are read from an installed rLLM; here a stand-in package with the same
file layout (``rllm/agents/system_prompts.py``) plays it, so the test needs no rLLM.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchgym_agents import SWEAgent, prompts_rllm

FAKE_PROMPTS = '''
SWE_SYSTEM_PROMPT = """sys text"""
SWE_SYSTEM_PROMPT_FN_CALL = """sys fn"""
SWE_USER_PROMPT = """user text: {problem_statement}"""
SWE_USER_PROMPT_FN_CALL = """user fn: {problem_statement}"""
SWEAGENT_SYSTEM_PROMPT = """sweagent sys"""
SWEAGENT_USER_PROMPT = """sweagent user: {problem_statement}"""
'''
CALL = "thinking first\n<function=execute_bash>\n<parameter=cmd>\nls\n</parameter>\n</function>"


@pytest.fixture
def fake_rllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    pkg = tmp_path / "rllm"
    (pkg / "agents").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('must not be imported')\n")
    (pkg / "agents" / "system_prompts.py").write_text(FAKE_PROMPTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    prompts_rllm.rllm_prompts.cache_clear()
    yield
    prompts_rllm.rllm_prompts.cache_clear()
    sys.modules.pop("rllm", None)


def test_use_fn_calling_picks_the_tool_format() -> None:
    assert SWEAgent("r2egym", use_fn_calling=True).tool_format == "native"
    assert SWEAgent("r2egym", use_fn_calling=False).tool_format == "text"
    with pytest.raises(ValueError, match="conflicts with tool_format='text'"):
        SWEAgent("r2egym", use_fn_calling=True, tool_format="text")


def test_format_model_response_stores_thought_and_canonical_call() -> None:
    agent = SWEAgent("r2egym", tool_format="text", format_model_response=True)
    agent.update_from_env("bug", 0.0, False, {})
    agent.update_from_model(CALL + "\ntrailing chatter")
    content = agent.messages[-1]["content"]
    assert content.startswith("thinking first\n\n<function=execute_bash>")
    assert "trailing chatter" not in content and content.endswith("</function>")


def test_rllm_prompts_and_steps_remaining(fake_rllm: None) -> None:
    agent = SWEAgent("r2egym", prompts="rllm")
    agent.update_from_env("the bug", 0.0, False, {"max_steps": 3})
    system, user = agent.chat_completions
    assert system["content"] == "sys text"
    assert user["content"] == "user text: the bug\nSteps Remaining: 2"
    agent.update_from_model(CALL)
    agent.update_from_env("out", 0.0, False, {"max_steps": 3})
    assert agent.messages[-1]["content"] == "out\nSteps Remaining: 1"
    agent.update_from_model(CALL)
    agent.update_from_env("out", 0.0, False, {"max_steps": 3, "cur_tokens": 30000})
    assert agent.messages[-1]["content"].endswith(
        "Please submit your answer NOW.\nYou are running out of tokens. Please submit your answer NOW."
    )
    fn = SWEAgent("r2egym", prompts="rllm", use_fn_calling=True)
    fn.update_from_env("x", 0.0, False, {})
    assert [m["content"] for m in fn.chat_completions] == ["sys fn", "user fn: x"]
    sa = SWEAgent("sweagent", prompts="rllm")
    sa.update_from_env("x", 0.0, False, {})
    assert sa.chat_completions[0]["content"] == "sweagent sys"


def test_rllm_prompts_need_rllm_and_a_matching_scaffold(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="r2egym and sweagent"):
        SWEAgent("debug-gym", prompts="rllm")
    with pytest.raises(ValueError, match="allowed: 'patchgym', 'rllm'"):
        SWEAgent("r2egym", prompts="rlm")  # type: ignore[arg-type]
    monkeypatch.setattr(prompts_rllm.importlib.util, "find_spec", lambda name: None)
    prompts_rllm.rllm_prompts.cache_clear()
    agent = SWEAgent("r2egym", prompts="rllm")
    with pytest.raises(prompts_rllm.RLLMPromptsMissing, match=r"git\+https://github\.com/rllm-org"):
        agent.update_from_env("x", 0.0, False, {})
    prompts_rllm.rllm_prompts.cache_clear()
