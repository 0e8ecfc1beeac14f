"""File viewing and editing through the sandbox's file API (never the host's files).

Shared by R2E-Gym's ``file_editor`` and SWE-agent's ``str_replace_editor``: ``view``
(numbered lines, optional ``view_range``; a folder lists two levels), ``create`` (refuses
to overwrite), ``str_replace`` (``old_str`` must match exactly once), ``insert`` (after
``insert_line``; 0 = top) and ``undo_edit`` (per file, most recent first).
"""

from __future__ import annotations

import shlex
from typing import Any, ClassVar

from patchgym_envs.tools.base import Tool, ToolError, ToolParam, ToolSpec
from patchgym_envs.tools.bounded import (
    FILE_REFUSALS,
    MAX_EDIT_BYTES,
    probe,
    read_editable,
    read_lines,
    refusal,
    refuse_special,
)
from patchgym_envs.tools.context import ToolContext
from patchgym_sandbox import NotARegularFile, SandboxFileNotFound

SNIPPET_LINES = 4


def numbered(text: str, start: int = 1) -> str:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return "\n".join(f"{i:6d}\t{line}" for i, line in enumerate(lines, start))


async def read_text(ctx: ToolContext, real: str) -> str:
    """The whole file, for editing (refused past ``MAX_EDIT_BYTES``, see ``bounded``)."""
    return await read_editable(ctx, real)


async def is_dir(ctx: ToolContext, real: str) -> bool:
    res = await ctx.sandbox.exec(f"test -d {shlex.quote(real)}", timeout=30)
    return res.exit_code == 0


async def exists(ctx: ToolContext, real: str) -> bool:
    """Anything at ``real``, a dangling link included (``create`` must not write through it)."""
    q = shlex.quote(real)
    res = await ctx.sandbox.exec(f"test -e {q} || test -L {q}", timeout=30)
    return res.exit_code == 0


async def write_text(
    ctx: ToolContext,
    real: str,
    content: str,
    *,
    remember: bool = True,
    previous: str | None = None,
) -> None:
    """Write ``content``; with ``remember``, the file's text before (``previous`` when the
    caller just read it, else read now) goes on its undo stack."""
    if remember and previous is not None:
        ctx.history.setdefault(real, []).append(previous)
    elif remember:
        try:
            data = await ctx.sandbox.read_file(real, max_bytes=MAX_EDIT_BYTES)
            old: str | None = data.decode("utf-8", errors="replace")
        except NotARegularFile as exc:  # before its base class, SandboxFileNotFound
            raise refusal(ctx, real, exc) from None
        except SandboxFileNotFound:
            old = None
        except FILE_REFUSALS as exc:
            raise refusal(ctx, real, exc) from None
        if old is not None:
            ctx.history.setdefault(real, []).append(old)
    try:
        await ctx.sandbox.write_file(real, content)
    except FILE_REFUSALS as exc:
        raise refusal(ctx, real, exc) from None
    ctx.files_changed()


async def list_dir(ctx: ToolContext, real: str, depth: int = 2) -> str:
    cmd = (
        f"find {shlex.quote(real)} -maxdepth {depth} -not -path '*/.*' -not -path '*/__pycache__*' "
        "| sort"
    )
    res = await ctx.sandbox.exec(cmd, timeout=ctx.settings.step_timeout_s)
    header = f"Files and directories up to {depth} levels deep in {ctx.shown(real)}, excluding hidden items:\n"
    return header + ctx.to_shown(res.stdout)


def snippet(content: str, line: int, extra: int) -> str:
    lines = content.split("\n")
    start = max(0, line - SNIPPET_LINES - 1)
    end = min(len(lines), line + extra + SNIPPET_LINES)
    return numbered("\n".join(lines[start:end]), start + 1)


class Editor:
    """The edit operations; tools call these with resolved real paths."""

    @staticmethod
    async def view(ctx: ToolContext, real: str, view_range: tuple[int, int] | None) -> str:
        info = await probe(ctx, real)
        refuse_special(ctx, real, info)
        if info.kind == "dir":
            if view_range is not None:
                raise ToolError("view_range is not allowed when path is a directory")
            return await list_dir(ctx, real)
        if info.kind != "file":
            raise ToolError(f"the path {ctx.shown(real)} does not exist or is not a file")
        n = info.lines
        if view_range is None:
            lines, cut = await read_lines(ctx, real, info, 1, max(n, 1))
            body = numbered("\n".join(lines))
            more = (
                f"\n[file has {n} lines ({info.size} bytes); shown up to line {len(lines)}; "
                "pass view_range to see the rest]"
                if cut
                else ""
            )
            return f"Here's the result of running `cat -n` on {ctx.shown(real)}:\n{body}\n{more}"
        first, last = view_range
        if not 1 <= first <= max(n, 1):
            raise ToolError(
                f"invalid view_range {list(view_range)}: first line must be in [1, {n}]"
            )
        if last == -1:
            last = n
        if last < first or last > n:
            raise ToolError(
                f"invalid view_range {list(view_range)}: last line must be -1 or in [{first}, {n}]"
            )
        lines, cut = await read_lines(ctx, real, info, first, last)
        if cut:
            last = first + len(lines) - 1
        body = numbered("\n".join(lines), first)
        return f"Here's the result of running `cat -n` on {ctx.shown(real)} (lines {first}-{last}):\n{body}\n"

    @staticmethod
    async def create(ctx: ToolContext, real: str, file_text: str) -> str:
        if await exists(ctx, real):
            raise ToolError(
                f"file already exists at {ctx.shown(real)}; `create` cannot overwrite it"
            )
        await write_text(ctx, real, file_text, remember=False)
        ctx.history.setdefault(real, []).append("\0absent")
        return f"File created successfully at: {ctx.shown(real)}"

    @staticmethod
    async def str_replace(ctx: ToolContext, real: str, old: str, new: str) -> str:
        content = await read_text(ctx, real)
        count = content.count(old)
        if old == "":
            raise ToolError("old_str must not be empty")
        if count == 0:
            raise ToolError(
                f"no replacement was performed: old_str did not appear verbatim in {ctx.shown(real)}"
            )
        if count > 1:
            starts = [i for i in range(len(content)) if content.startswith(old, i)]
            line_nos = sorted({content.count("\n", 0, s) + 1 for s in starts})
            raise ToolError(
                f"no replacement was performed: old_str appears {count} times in {ctx.shown(real)} "
                f"(lines {line_nos}); include more context so it is unique"
            )
        at = content.index(old)
        updated = content.replace(old, new, 1)
        await write_text(ctx, real, updated, previous=content)
        line = content.count("\n", 0, at) + 1
        return (
            f"The file {ctx.shown(real)} has been edited. Here's a snippet of the edited section:\n"
            f"{snippet(updated, line, new.count(chr(10)))}\n"
            "Review the changes and make sure they are as expected."
        )

    @staticmethod
    async def insert(ctx: ToolContext, real: str, line: int, text: str) -> str:
        content = await read_text(ctx, real)
        lines = content.split("\n")
        trailing = content.endswith("\n")
        if trailing:
            lines.pop()
        if not 0 <= line <= len(lines):
            raise ToolError(f"invalid insert_line {line}: must be in [0, {len(lines)}]")
        new_lines = text.split("\n")
        updated_lines = lines[:line] + new_lines + lines[line:]
        updated = "\n".join(updated_lines) + ("\n" if trailing or not content else "")
        await write_text(ctx, real, updated, previous=content)
        return (
            f"The file {ctx.shown(real)} has been edited. Here's a snippet of the edited section:\n"
            f"{snippet(updated, line + 1, len(new_lines) - 1)}\n"
            "Review the changes and make sure they are as expected (correct indentation, no duplicate lines)."
        )

    @staticmethod
    async def undo(ctx: ToolContext, real: str) -> str:
        stack = ctx.history.get(real)
        if not stack:
            raise ToolError(f"no edit history for {ctx.shown(real)}")
        previous = stack.pop()
        if previous == "\0absent":
            await ctx.sandbox.exec(f"rm -f {shlex.quote(real)}", timeout=30)
            ctx.files_changed()
            return f"Undid the creation of {ctx.shown(real)} (file removed)."
        await write_text(ctx, real, previous, remember=False)
        return f"Last edit to {ctx.shown(real)} undone successfully.\n{numbered(previous)}\n"


COMMANDS = ["view", "create", "str_replace", "insert", "undo_edit"]


class _EditorTool(Tool):
    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        command = self.arg_str(args, "command")
        raw_path = self.arg_str(args, "path")
        assert command is not None and raw_path is not None
        real = ctx.path(raw_path)
        if command == "view":
            return await Editor.view(ctx, real, self.arg_range(args, "view_range"))
        if command == "create":
            text = self.arg_str(args, "file_text")
            assert text is not None
            return await Editor.create(ctx, real, text)
        if command == "str_replace":
            old = self.arg_str(args, "old_str")
            assert old is not None
            return await Editor.str_replace(
                ctx, real, old, self.arg_str(args, "new_str", required=False, default="") or ""
            )
        if command == "insert":
            line = self.arg_int(args, "insert_line", required=True)
            text = self.arg_str(args, "new_str")
            assert line is not None and text is not None
            return await Editor.insert(ctx, real, line, text)
        if command == "undo_edit":
            return await Editor.undo(ctx, real)
        raise ToolError(f"unknown command {command!r}; allowed: {', '.join(COMMANDS)}")


_PARAMS = [
    ToolParam(name="command", description="The command to run.", required=True, enum=COMMANDS),
    ToolParam(
        name="path",
        description="Absolute path to a file or directory, e.g. /testbed/src/x.py.",
        required=True,
    ),
    ToolParam(name="file_text", description="Content of the file to create (`create`)."),
    ToolParam(
        name="old_str",
        description="Exact text to replace; must occur exactly once (`str_replace`).",
    ),
    ToolParam(
        name="new_str", description="Replacement text (`str_replace`) or text to insert (`insert`)."
    ),
    ToolParam(
        name="insert_line",
        type="integer",
        description="Insert `new_str` after this line; 0 inserts at the top (`insert`).",
    ),
    ToolParam(
        name="view_range",
        type="array",
        items="integer",
        description="Line range [first, last] to show (`view` on a file); last = -1 means to the end.",
    ),
]


class FileEditor(_EditorTool):
    """R2E-Gym's ``file_editor``."""

    spec: ClassVar[ToolSpec] = ToolSpec(
        name="file_editor",
        description=(
            "View, create and edit files. `view` shows a file with line numbers (or lists a "
            "directory two levels deep); `create` makes a new file; `str_replace` replaces an "
            "exact, unique occurrence of `old_str` with `new_str`; `insert` adds `new_str` after "
            "`insert_line`; `undo_edit` reverts the last edit of the file."
        ),
        parameters=_PARAMS,
    )


class StrReplaceEditor(_EditorTool):
    """SWE-agent's ``str_replace_editor`` (same operations)."""

    spec: ClassVar[ToolSpec] = ToolSpec(
        name="str_replace_editor",
        description=(
            "Custom editing tool for viewing, creating and editing files. State persists across "
            "calls. `view` prints a file with `cat -n` (or lists a directory); `create` cannot "
            "overwrite an existing file; `str_replace` needs `old_str` to match exactly one "
            "place in the file, whitespace included; `insert` puts `new_str` after `insert_line`; "
            "`undo_edit` reverts the last edit made to the file."
        ),
        parameters=_PARAMS,
    )
