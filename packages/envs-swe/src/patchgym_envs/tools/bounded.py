"""Reading files for tools without pulling them whole into the driver.

Contract: whatever a file's size, a tool reads at most about what it shows. A probe
(one ``exec``) gives kind, size and line count on the sandbox side; small files are read
whole (exact, one round trip), larger ones through ``sed``/``head -c`` in the sandbox so
only the requested lines, capped in bytes, cross to the driver. Edits need the whole
file, so they refuse files over :data:`MAX_EDIT_BYTES` with a message naming the limit.
"""

from __future__ import annotations

import shlex

from pydantic import BaseModel

from patchgym_envs.tools.base import ToolError
from patchgym_envs.tools.context import ToolContext
from patchgym_sandbox import (
    FileTooLarge,
    NotARegularFile,
    PathOutsideSandbox,
    SandboxFileError,
    SandboxFileNotFound,
)

WHOLE_READ_BYTES = 256 * 1024
"""Files up to this size are read whole (one round trip); larger ones line by line."""
MAX_VIEW_BYTES = 256 * 1024
"""At most this many bytes of a large file cross to the driver for one view."""
MAX_EDIT_BYTES = 4 * 1024 * 1024
"""Editing tools refuse larger files (they must read and write them whole)."""


class FileProbe(BaseModel):
    kind: str
    """``file``, ``dir``, ``special`` (FIFO, socket, device) or ``missing``."""
    size: int = 0
    lines: int = 0
    what: str = ""
    """For ``special``: what it is, in the words of ``stat -L -c %F``."""


# Links are judged by their target (`-f`, `stat -L`), never by the link itself; `wc` and
# `tail` only ever open a regular file, so a FIFO named like a source file is never read.
_PROBE = (
    'if [ -d "$1" ]; then echo dir; elif [ -f "$1" ]; then '
    'n=$(wc -l < "$1"); [ -n "$(tail -c1 "$1")" ] && n=$((n+1)); '
    'echo file $(stat -L -c %s -- "$1") $n; '
    'elif [ -e "$1" ]; then echo special $(stat -L -c %F -- "$1"); else echo missing; fi'
)


async def probe(ctx: ToolContext, real: str) -> FileProbe:
    """Kind, byte size and line count (a last line without newline counts) of ``real``."""
    script = f"sh -c {shlex.quote(_PROBE)} patchgym-probe {shlex.quote(real)}"
    res = await ctx.sandbox.exec(script, timeout=max(30.0, ctx.settings.step_timeout_s))
    parts = res.stdout.split()
    if not parts or parts[0] not in ("dir", "file", "special"):
        return FileProbe(kind="missing")
    if parts[0] == "dir":
        return FileProbe(kind="dir")
    if parts[0] == "special":
        return FileProbe(kind="special", what=" ".join(parts[1:]) or "not a regular file")
    try:
        return FileProbe(kind="file", size=int(parts[1]), lines=int(parts[2]))
    except (IndexError, ValueError):
        return FileProbe(kind="missing")


def refusal(ctx: ToolContext, real: str, exc: Exception) -> ToolError:
    """The observation for a file the sandbox API refused (kind, size, a link out)."""
    shown = ctx.shown(real)
    if isinstance(exc, NotARegularFile):
        return ToolError(f"{shown} is {exc.kind}, not a regular file; the file tools refuse it")
    if isinstance(exc, FileTooLarge):
        size = f"{exc.size} bytes, " if exc.size is not None else ""
        return ToolError(
            f"{shown} is {size}over the {exc.limit}-byte limit of this tool; view a range of "
            "it, or use a shell command"
        )
    if isinstance(exc, SandboxFileNotFound):
        return ToolError(f"the path {shown} does not exist or is not a file")
    if isinstance(exc, PathOutsideSandbox):
        return ToolError(f"the path {shown} leads outside the sandbox through a link; refused")
    return ToolError(f"cannot use {shown}: {exc}")


FILE_REFUSALS = (
    NotARegularFile,
    FileTooLarge,
    SandboxFileNotFound,
    PathOutsideSandbox,
    SandboxFileError,
)


async def read_capped(ctx: ToolContext, real: str, max_bytes: int) -> bytes:
    """``read_file`` with a byte cap; refusals become a :class:`ToolError` that says why."""
    try:
        return await ctx.sandbox.read_file(real, max_bytes=max_bytes)
    except FILE_REFUSALS as exc:
        raise refusal(ctx, real, exc) from None


def refuse_special(ctx: ToolContext, real: str, info: FileProbe) -> None:
    if info.kind == "special":
        raise ToolError(
            f"{ctx.shown(real)} is a {info.what}, not a regular file; the file tools refuse it"
        )


async def read_lines(
    ctx: ToolContext, real: str, info: FileProbe, first: int, last: int
) -> tuple[list[str], bool]:
    """Lines ``first..last`` (1-based, inclusive) and whether the byte cap cut them short."""
    if info.size <= WHOLE_READ_BYTES:
        data = await read_capped(ctx, real, WHOLE_READ_BYTES)
        lines = data.decode("utf-8", errors="replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return lines[first - 1 : last], False
    q = shlex.quote(real)  # `-f` again: the file may have been swapped since the probe
    cmd = f"[ -f {q} ] && sed -n '{first},{last}p;{last}q' {q} | head -c {MAX_VIEW_BYTES + 1}"
    res = await ctx.sandbox.exec(cmd, timeout=max(30.0, ctx.settings.step_timeout_s))
    raw = res.stdout
    cut = len(raw.encode("utf-8", errors="replace")) > MAX_VIEW_BYTES or res.truncated
    lines = raw.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if cut and lines:
        lines.pop()  # the last line may be partial
    return lines, cut


async def read_editable(ctx: ToolContext, real: str) -> str:
    """The whole file, for editing: one read capped at :data:`MAX_EDIT_BYTES` (a larger
    file, a folder or a special file is refused with a :class:`ToolError` that says why)."""
    try:
        data = await ctx.sandbox.read_file(real, max_bytes=MAX_EDIT_BYTES)
    except FileTooLarge as exc:
        size = f"{exc.size} bytes, " if exc.size is not None else ""
        raise ToolError(
            f"{ctx.shown(real)} is {size}over the {MAX_EDIT_BYTES}-byte limit of the editing "
            "tools; view a range of it, or change it with a shell command (sed)"
        ) from None
    except FILE_REFUSALS as exc:
        raise refusal(ctx, real, exc) from None
    return data.decode("utf-8", errors="replace")
