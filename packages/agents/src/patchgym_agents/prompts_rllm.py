"""rLLM's SWE prompts (``prompts="rllm"``), read from the installed rLLM, never copied here.

rLLM keeps them as plain string constants in ``rllm/agents/system_prompts.py`` (v0.2.x and
the current tree). The file is located without importing rLLM (its package imports torch)
and read with :mod:`ast` (literal assignments only, nothing executed). rLLM's agent also
appends a steps-remaining line to every observation; :func:`steps_note` reproduces it.
"""

from __future__ import annotations

import ast
import importlib.util
from functools import cache
from pathlib import Path

RLLM_INSTALL = 'pip install "rllm @ git+https://github.com/rllm-org/rllm@v0.2.1.post1"'
TOKEN_WARNING_THRESHOLD = 28000
"""rLLM's ``swe_agent.TOKEN_WARNING_THRESHOLD``."""


class RLLMPromptsMissing(ImportError):
    """``prompts="rllm"`` without rLLM installed."""


@cache
def rllm_prompts() -> dict[str, str]:
    """The string constants of rLLM's ``rllm/agents/system_prompts.py``."""
    spec = importlib.util.find_spec("rllm")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    path = next(
        (Path(r) / "agents" / "system_prompts.py" for r in roots if (Path(r) / "agents").is_dir()),
        None,
    )
    if path is None or not path.is_file():
        raise RLLMPromptsMissing(
            f"prompts='rllm' reads rLLM's prompts from the installed rLLM, which is missing: "
            f"{RLLM_INSTALL} (or put a checkout on PYTHONPATH)"
        )
    out: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            out[node.targets[0].id] = node.value.value
    return out


def rllm_templates(scaffold: str, use_fn_calling: bool) -> tuple[str, str]:
    """``(system, user_template)`` exactly as rLLM's ``SWEAgent.__init__`` picks them."""
    p = rllm_prompts()
    if scaffold == "sweagent":
        return p["SWEAGENT_SYSTEM_PROMPT"], p["SWEAGENT_USER_PROMPT"]
    if use_fn_calling:
        return p["SWE_SYSTEM_PROMPT_FN_CALL"], p["SWE_USER_PROMPT_FN_CALL"]
    return p["SWE_SYSTEM_PROMPT"], p["SWE_USER_PROMPT"]


def steps_note(max_steps: int | None, step: int, cur_tokens: int | None) -> str:
    """What rLLM's ``SWEAgent.update_from_env`` appends to an observation."""
    note = ""
    if max_steps:
        remaining = max_steps - step - 1
        if remaining > 0:
            note += f"\nSteps Remaining: {remaining}"
        else:
            note += "\nYou have reached the maximum number of steps. Please submit your answer NOW."
    if cur_tokens is not None and cur_tokens >= TOKEN_WARNING_THRESHOLD:
        note += "\nYou are running out of tokens. Please submit your answer NOW."
    return note
