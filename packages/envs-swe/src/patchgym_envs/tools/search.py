"""Finding things: R2E-Gym's ``search``, debug-gym's ``grep`` and ``listdir``."""

from __future__ import annotations

import shlex
from typing import Any, ClassVar

from patchgym_envs.tools.base import Tool, ToolError, ToolParam, ToolSpec
from patchgym_envs.tools.context import ToolContext
from patchgym_envs.tools.files import is_dir, list_dir

EXCLUDES = (
    "--exclude-dir=.git --exclude-dir=__pycache__ --exclude-dir=node_modules --exclude-dir=.venv"
)
MAX_FILES = 100


class Search(Tool):
    """R2E-Gym's ``search``: files with matches in a folder, or matching lines in a file."""

    spec: ClassVar[ToolSpec] = ToolSpec(
        name="search",
        description=(
            "Search for a literal term. In a directory (default /testbed) it lists the files "
            "containing it with match counts; in a file it shows the matching lines with numbers."
        ),
        parameters=[
            ToolParam(name="search_term", description="The text to search for.", required=True),
            ToolParam(
                name="path", description="File or directory to search in (default: /testbed)."
            ),
        ],
    )

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        term = self.arg_str(args, "search_term")
        assert term is not None
        if not term:
            raise ToolError("search_term is empty")
        real = ctx.path(
            self.arg_str(args, "path", required=False, default=ctx.shown_workdir) or "."
        )
        q = shlex.quote(term)
        if await is_dir(ctx, real):
            res = await ctx.sandbox.exec(
                f"grep -rIcF {EXCLUDES} -- {q} {shlex.quote(real)} | grep -v ':0$'",
                timeout=ctx.settings.step_timeout_s,
            )
            hits = []
            for line in res.stdout.splitlines():
                path, _, count = line.rpartition(":")
                if path and count.isdigit():
                    hits.append((ctx.shown(path), int(count)))
            if not hits:
                return f'No matches found for "{term}" in {ctx.shown(real)}'
            total = sum(c for _, c in hits)
            lines = [f'Found {total} matches for "{term}" in {ctx.shown(real)}:']
            lines += [f"{p} ({c} matches)" for p, c in sorted(hits)[:MAX_FILES]]
            if len(hits) > MAX_FILES:
                lines.append(f"[{len(hits) - MAX_FILES} more files not shown; narrow the search]")
            return "\n".join(lines)
        res = await ctx.sandbox.exec(
            f"grep -nF -- {q} {shlex.quote(real)}", timeout=ctx.settings.step_timeout_s
        )
        if res.exit_code == 2:
            raise ToolError(
                f"cannot search {ctx.shown(real)}: {res.stderr.strip() or 'no such file'}"
            )
        if not res.stdout.strip():
            return f'No matches found for "{term}" in {ctx.shown(real)}'
        n = len(res.stdout.splitlines())
        return f'Matches for "{term}" in {ctx.shown(real)} ({n}):\n{res.stdout}'


class Grep(Tool):
    """debug-gym's ``grep``: regular-expression search with line numbers."""

    spec: ClassVar[ToolSpec] = ToolSpec(
        name="grep",
        description="Search files for a regular expression (grep -E); prints path:line:text.",
        parameters=[
            ToolParam(name="pattern", description="Extended regular expression.", required=True),
            ToolParam(name="path", description="File or directory (default: /testbed)."),
        ],
    )

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        pattern = self.arg_str(args, "pattern")
        assert pattern is not None
        real = ctx.path(
            self.arg_str(args, "path", required=False, default=ctx.shown_workdir) or "."
        )
        res = await ctx.sandbox.exec(
            f"grep -rnIE {EXCLUDES} -- {shlex.quote(pattern)} {shlex.quote(real)}",
            timeout=ctx.settings.step_timeout_s,
        )
        if res.exit_code == 2:
            raise ToolError(f"grep failed: {ctx.to_shown(res.stderr.strip())}")
        if not res.stdout.strip():
            return f"No matches for /{pattern}/ in {ctx.shown(real)}"
        return ctx.to_shown(res.stdout)


class ListDir(Tool):
    """debug-gym's ``listdir``."""

    spec: ClassVar[ToolSpec] = ToolSpec(
        name="listdir",
        description="List a directory as a tree (hidden files excluded).",
        parameters=[
            ToolParam(name="path", description="Directory (default: /testbed)."),
            ToolParam(
                name="depth", type="integer", description="How many levels deep (default 2)."
            ),
        ],
    )

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        real = ctx.path(
            self.arg_str(args, "path", required=False, default=ctx.shown_workdir) or "."
        )
        depth = self.arg_int(args, "depth") or 2
        if not 1 <= depth <= 10:
            raise ToolError(f"depth must be between 1 and 10, got {depth}")
        if not await is_dir(ctx, real):
            raise ToolError(f"{ctx.shown(real)} is not a directory")
        return await list_dir(ctx, real, depth)
