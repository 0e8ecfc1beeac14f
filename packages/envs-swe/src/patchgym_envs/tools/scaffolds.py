"""Tool scaffolds by name: ``r2egym``, ``sweagent``, ``debug-gym``, ``graph-planner``.

A :class:`Scaffold` owns its tools, renders their schemas (function calling) and text
forms, and executes a :class:`ToolCall` into an :class:`Observation`: unknown tools,
bad arguments and failing commands become error observations; only infrastructure
errors (``patchgym_sandbox.InfraError``) propagate, so the environment can mark the
episode instead of blaming the policy.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from patchgym_envs.errors import UnknownScaffoldError
from patchgym_envs.tools.base import Observation, Tool, ToolError, bound
from patchgym_envs.tools.calls import ToolCall
from patchgym_envs.tools.context import ToolContext
from patchgym_envs.tools.debug import Edit, Eval, Pdb, View
from patchgym_envs.tools.files import FileEditor, StrReplaceEditor
from patchgym_envs.tools.graph_planner import graph_planner_tools
from patchgym_envs.tools.search import Grep, ListDir, Search
from patchgym_envs.tools.shell import Bash, ExecuteBash, SweAgentBash
from patchgym_envs.tools.submit import Finish, Submit
from patchgym_sandbox import (
    FileTooLarge,
    InfraError,
    PathOutsideSandbox,
    SandboxClosed,
    SandboxFileError,
    SandboxFileNotFound,
)

log = logging.getLogger(__name__)


class Scaffold:
    """A named set of tools and how to run them."""

    def __init__(self, name: str, tools: Sequence[Tool]) -> None:
        self.name = name
        self.tools: dict[str, Tool] = {t.name: t for t in tools}

    @property
    def tool_names(self) -> list[str]:
        return list(self.tools)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """OpenAI function-calling ``tools`` list."""
        return [t.spec.json_schema() for t in self.tools.values()]

    def text_instructions(self) -> str:
        """The tool descriptions for the ``<function=...>`` text format."""
        return "\n\n".join(t.spec.text_form() for t in self.tools.values())

    def ends_episode(self, name: str) -> bool:
        tool = self.tools.get(name)
        return tool is not None and tool.ends_episode

    async def execute(self, call: ToolCall, ctx: ToolContext) -> Observation:
        """Run one call; never raises except for infrastructure failures."""
        tool = self.tools.get(call.name)
        if tool is None:
            return Observation(
                text=f"ERROR: unknown tool {call.name!r}; available tools: {', '.join(self.tools)}",
                error=True,
                tool=call.name,
            )
        deadline = ctx.settings.tool_deadline_s
        watch = asyncio.timeout(deadline)
        try:
            async with watch:
                text = await tool.run(ctx, dict(call.arguments))
            error = False
        except InfraError:
            raise
        except SandboxClosed:
            raise
        except TimeoutError as exc:
            if watch.expired():
                ctx.files_changed()  # stateful tools (pdb) start afresh after an abandoned call
                text = f"ERROR: {call.name} did not finish within {deadline:g} s and was abandoned"
            else:
                text = f"ERROR: {call.name} failed: {type(exc).__name__}: {exc}"
            error = True
        except ToolError as exc:
            text, error = f"ERROR: {exc}", True
        except (PathOutsideSandbox, SandboxFileError, SandboxFileNotFound, FileTooLarge) as exc:
            text, error = f"ERROR: {call.name}: {exc}", True
        except Exception as exc:  # a tool bug must not kill the episode
            log.exception("tool %s failed", call.name)
            text, error = f"ERROR: {call.name} failed: {type(exc).__name__}: {exc}", True
        shown, truncated = bound(text, ctx.settings.max_observation_chars)
        return Observation(
            text=shown,
            error=error,
            truncated=truncated,
            submitted=tool.ends_episode and not error,
            tool=call.name,
        )


def r2egym() -> Scaffold:
    return Scaffold("r2egym", [FileEditor(), Search(), ExecuteBash(), Finish()])


def sweagent() -> Scaffold:
    return Scaffold("sweagent", [StrReplaceEditor(), SweAgentBash(), Submit()])


def debug_gym() -> Scaffold:
    return Scaffold(
        "debug-gym", [Pdb(), Eval(), View(), Edit(), Grep(), ListDir(), Bash(), Submit()]
    )


def graph_planner() -> Scaffold:
    return Scaffold("graph-planner", graph_planner_tools())


SCAFFOLDS: dict[str, Callable[[], Scaffold]] = {
    "r2egym": r2egym,
    "sweagent": sweagent,
    "debug-gym": debug_gym,
    "graph-planner": graph_planner,
}
ALIASES = {
    "r2e": "r2egym",
    "r2e-gym": "r2egym",
    "swe-agent": "sweagent",
    "swe_agent": "sweagent",
    "debug_gym": "debug-gym",
    "debuggym": "debug-gym",
    "graph_planner": "graph-planner",
    "graphplanner": "graph-planner",
}


def scaffold_names() -> list[str]:
    return list(SCAFFOLDS)


def get_scaffold(name: str) -> Scaffold:
    """A fresh scaffold by name (``debug_gym`` and similar spellings accepted)."""
    key = ALIASES.get(name.lower(), name.lower())
    if key not in SCAFFOLDS:
        raise UnknownScaffoldError(f"unknown scaffold {name!r} — known: {', '.join(SCAFFOLDS)}")
    return SCAFFOLDS[key]()
