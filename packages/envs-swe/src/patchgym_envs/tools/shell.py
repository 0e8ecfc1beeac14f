"""Run a bash command in the sandbox (``execute_bash`` / ``bash``), with an optional block list."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from typing import Any, ClassVar

from patchgym_envs.tools.base import Tool, ToolError, ToolParam, ToolSpec
from patchgym_envs.tools.context import ToolContext
from patchgym_sandbox import ExecResult

_SPLIT = re.compile(r"\|\||&&|[;|&\n()]")


_ASSIGN = re.compile(r"\w{1,256}=")


def _first_word(tokens: Iterator[str]) -> str | None:
    for token in tokens:
        if not _ASSIGN.match(token):  # skip VAR=value prefixes
            return token.rsplit("/", 1)[-1]
    return None


def _lex(part: str) -> Iterator[str]:
    lex = shlex.shlex(part, posix=True)
    lex.whitespace_split = True
    lex.commenters = ""
    return iter(lex)


def first_words(cmd: str) -> list[str]:
    """The program name of each simple command in ``cmd`` (best effort).

    Linear in ``len(cmd)``: tokens are read lazily and only up to each command's first
    word (unbalanced quotes fall back to splitting on whitespace).
    """
    words = []
    for part in _SPLIT.split(cmd):
        plain = "'" not in part and '"' not in part and "\\" not in part
        try:  # nothing to unquote: C-speed split
            word = _first_word(iter(part.split()) if plain else _lex(part))
        except ValueError:
            word = _first_word(iter(part.split()))
        if word:
            words.append(word)
    return words


def format_result(ctx: ToolContext, res: ExecResult, timeout: float) -> str:
    out = ctx.to_shown(res.output)
    if res.timed_out or res.idle_timed_out:
        return f"{out}\n[command timed out after {timeout:g} s and was killed]"
    if res.exit_code != 0:
        return (
            f"{out}\n[exit code {res.exit_code}]"
            if out.strip()
            else f"[exit code {res.exit_code}, no output]"
        )
    return out if out.strip() else "[command finished with exit code 0 and no output]"


async def run_command(ctx: ToolContext, cmd: str, timeout: float | None = None) -> str:
    timeout = timeout or ctx.settings.step_timeout_s
    res = await ctx.sandbox.exec(ctx.to_real(cmd), timeout=timeout)
    ctx.files_changed()
    return format_result(ctx, res, timeout)


class ExecuteBash(Tool):
    """R2E-Gym's ``execute_bash``."""

    param = "cmd"
    spec: ClassVar[ToolSpec] = ToolSpec(
        name="execute_bash",
        description=(
            "Run a bash command in the repository (working directory /testbed) and return its "
            "output and exit code. Commands are non-interactive and time out; run long jobs in "
            "the background and redirect their output to a file."
        ),
        parameters=[ToolParam(name="cmd", description="The bash command to run.", required=True)],
    )

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        cmd = self.arg_str(args, self.param)
        if cmd is None or not cmd.strip():
            raise ToolError(f"parameter '{self.param}' is empty")
        blocked = sorted(set(first_words(cmd)) & set(ctx.settings.blocked_commands))
        if blocked:
            raise ToolError(
                f"command(s) {', '.join(blocked)} are not allowed here; "
                f"blocked: {', '.join(ctx.settings.blocked_commands)}"
            )
        return await run_command(ctx, cmd)


class Bash(ExecuteBash):
    """debug-gym's ``bash`` (and SWE-agent style ``command`` parameter)."""

    param = "command"
    spec: ClassVar[ToolSpec] = ToolSpec(
        name="bash",
        description="Run a bash command in the repository (working directory /testbed).",
        parameters=[
            ToolParam(name="command", description="The bash command to run.", required=True)
        ],
    )


class SweAgentBash(ExecuteBash):
    """SWE-agent's ``execute_bash`` takes ``command``."""

    param = "command"
    spec: ClassVar[ToolSpec] = ToolSpec(
        name="execute_bash",
        description=(
            "Execute a bash command in the terminal (working directory /testbed). Long-running "
            "commands should run in the background with output redirected to a file."
        ),
        parameters=[
            ToolParam(name="command", description="The bash command to execute.", required=True)
        ],
    )
