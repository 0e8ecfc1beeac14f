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

WHOLE_READ_BYTES = 256 * 1024
"""Files up to this size are read whole (one round trip); larger ones line by line."""
MAX_VIEW_BYTES = 256 * 1024
"""At most this many bytes of a large file cross to the driver for one view."""
MAX_EDIT_BYTES = 4 * 1024 * 1024
"""Editing tools refuse larger files (they must read and write them whole)."""


class FileProbe(BaseModel):
    kind: str
    """``file``, ``dir`` or ``missing``."""
    size: int = 0
    lines: int = 0


async def probe(ctx: ToolContext, real: str) -> FileProbe:
    """Kind, byte size and line count (a last line without newline counts) of ``real``."""
    q = shlex.quote(real)
    script = (
        f"if [ -d {q} ]; then echo dir; elif [ -f {q} ]; then "
        f'n=$(wc -l < {q}); [ -n "$(tail -c1 {q})" ] && n=$((n+1)); '
        f"echo file $(stat -c %s {q}) $n; else echo missing; fi"
    )
    res = await ctx.sandbox.exec(script, timeout=max(30.0, ctx.settings.step_timeout_s))
    parts = res.stdout.split()
    if not parts or parts[0] not in ("dir", "file"):
        return FileProbe(kind="missing")
    if parts[0] == "dir":
        return FileProbe(kind="dir")
    try:
        return FileProbe(kind="file", size=int(parts[1]), lines=int(parts[2]))
    except (IndexError, ValueError):
        return FileProbe(kind="missing")


async def read_lines(
    ctx: ToolContext, real: str, info: FileProbe, first: int, last: int
) -> tuple[list[str], bool]:
    """Lines ``first..last`` (1-based, inclusive) and whether the byte cap cut them short."""
    if info.size <= WHOLE_READ_BYTES:
        data = await ctx.sandbox.read_file(real)
        lines = data.decode("utf-8", errors="replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return lines[first - 1 : last], False
    cmd = f"sed -n '{first},{last}p;{last}q' {shlex.quote(real)} | head -c {MAX_VIEW_BYTES + 1}"
    res = await ctx.sandbox.exec(cmd, timeout=max(30.0, ctx.settings.step_timeout_s))
    raw = res.stdout
    cut = len(raw.encode("utf-8", errors="replace")) > MAX_VIEW_BYTES or res.truncated
    lines = raw.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if cut and lines:
        lines.pop()  # the last line may be partial
    return lines, cut


async def check_editable(ctx: ToolContext, real: str) -> None:
    """Refuse to read a file whole for editing when it is over :data:`MAX_EDIT_BYTES`."""
    info = await probe(ctx, real)
    if info.kind == "file" and info.size > MAX_EDIT_BYTES:
        raise ToolError(
            f"{ctx.shown(real)} is {info.size} bytes, over the {MAX_EDIT_BYTES}-byte limit of "
            "the editing tools; view a range of it, or change it with a shell command (sed)"
        )
