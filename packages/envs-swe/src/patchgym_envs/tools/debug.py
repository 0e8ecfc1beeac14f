"""debug-gym's tools: a persistent ``pdb``, ``eval``, ``view`` and line-range ``edit``.

The pdb session lives in one :meth:`Sandbox.session` shell running ``python3 -m pdb -m
pytest -s ...``. Breakpoints set through the tool are remembered; when the code changes
(an edit, or any bash command) the session is restarted on the next pdb call and the
breakpoints are set again, shifted by line-range edits (and dropped when their line was
replaced), so they survive edits and restarts.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from patchgym_envs.tools.base import Tool, ToolError, ToolParam, ToolSpec
from patchgym_envs.tools.bounded import probe, read_lines, refuse_special
from patchgym_envs.tools.context import ToolContext
from patchgym_envs.tools.files import read_text, write_text
from patchgym_envs.tools.shell import run_command
from patchgym_sandbox import SessionError, ShellSession

PROMPT = re.compile(r"\(Pdb\) ")
CONFIRM = re.compile(r"\(Pdb\) |Clear all breaks\? ")
_BREAK = re.compile(r"^\s*(?:b|break|tbreak)\s+([^\s:,]+):(\d+)\s*(?:,\s*(.+))?$")
_CLEAR = re.compile(r"^\s*(?:cl|clear)(?:\s+(.*))?$")
_QUIT = re.compile(r"^\s*(?:q|quit|exit)\s*$")
_RESTART = re.compile(r"^\s*(?:restart|run)\b")


@dataclass
class Breakpoint:
    path: str
    """Relative to the workdir."""
    line: int
    condition: str | None = None

    def command(self) -> str:
        return f"b {self.path}:{self.line}" + (f", {self.condition}" if self.condition else "")


@dataclass
class PdbState:
    session: ShellSession | None = None
    breakpoints: list[Breakpoint] = field(default_factory=list)
    stale: bool = False
    start_timeout_s: float = 60.0

    def shift(self, path: str, start: int, end: int, new_count: int) -> None:
        """Lines [start, end] of ``path`` became ``new_count`` lines."""
        delta = new_count - (end - start + 1)
        kept = []
        for bp in self.breakpoints:
            if bp.path == path and start <= bp.line <= end:
                continue
            if bp.path == path and bp.line > end:
                bp.line += delta
            kept.append(bp)
        self.breakpoints = kept

    def files_changed(self) -> None:
        self.stale = True

    async def close(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            await session.close()


def pdb_state(ctx: ToolContext, *, create: bool = False) -> PdbState | None:
    """This episode's pdb state, kept in the context under the tool's name."""
    state = ctx.tool_state.get("pdb")
    if state is None and create:
        state = ctx.tool_state["pdb"] = PdbState()
    return state if isinstance(state, PdbState) else None


def pdb_entrypoint(test_cmd: str) -> str:
    if "-m pytest" in test_cmd:
        return test_cmd.replace("-m pytest", "-m pdb -m pytest -s", 1)
    return f"python3 -m pdb {test_cmd}"


def _clean(text: str, command: str) -> str:
    lines = text.replace("\r", "").split("\n")
    if lines and lines[0].strip() == command.strip():
        lines = lines[1:]  # readline echoes what was typed
    return "\n".join(lines).strip("\n")


class Pdb(Tool):
    spec: ClassVar[ToolSpec] = ToolSpec(
        name="pdb",
        description=(
            "Send one command to a persistent pdb session debugging the test suite "
            "(python -m pdb -m pytest -s). Examples: `b pkg/mod.py:42`, `c`, `p variable`, "
            "`n`, `s`, `l`, `w`, `cl`. Breakpoints are kept across edits and restarts; "
            "`restart` starts the program again."
        ),
        parameters=[ToolParam(name="command", description="The pdb command.", required=True)],
    )

    async def _start(self, ctx: ToolContext, state: PdbState) -> str:
        await state.close()
        session = ctx.sandbox.session()
        await session.start()
        state.session = session
        entry = pdb_entrypoint(ctx.test_cmd or ctx.settings.test_cmd)
        await session.send(entry + "\n")
        res = await session.expect(PROMPT, timeout=state.start_timeout_s)
        if res.timed_out:
            await state.close()
            raise ToolError(
                f"pdb did not start within {state.start_timeout_s:g} s: {ctx.to_shown(res.output[-500:])}"
            )
        notes = []
        for bp in state.breakpoints:
            await session.send(bp.command() + "\n")
            r = await session.expect(PROMPT, timeout=30)
            notes.append(
                _clean(r.output[: -len("(Pdb) ")] if not r.timed_out else r.output, bp.command())
            )
        state.stale = False
        head = "[pdb session (re)started"
        return head + (
            f"; breakpoints restored: {'; '.join(n for n in notes if n)}]" if notes else "]"
        )

    async def _send(self, ctx: ToolContext, state: PdbState, command: str) -> str:
        assert state.session is not None
        await state.session.send(command + "\n")
        clear = _CLEAR.match(command)
        pattern = CONFIRM if clear is not None and not clear.group(1) else PROMPT
        res = await state.session.expect(pattern, timeout=ctx.settings.step_timeout_s)
        if not res.timed_out and res.output.endswith("Clear all breaks? "):
            await state.session.send("y\n")
            more = await state.session.expect(PROMPT, timeout=30)
            return _clean(res.output + more.output[: -len("(Pdb) ")], command)
        if res.timed_out:
            await state.session.interrupt()
            again = await state.session.expect(PROMPT, timeout=10)
            if again.timed_out:
                await state.close()
                return _clean(res.output + again.output, command) + (
                    "\n[the command did not return to the pdb prompt and the session was ended; "
                    "the next pdb call starts a new one]"
                )
            return _clean(res.output + again.output[: -len("(Pdb) ")], command) + (
                f"\n[interrupted after {ctx.settings.step_timeout_s:g} s]"
            )
        return _clean(res.output[: -len("(Pdb) ")], command)

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        command = self.arg_str(args, "command")
        assert command is not None
        command = ctx.to_real(command.strip())
        if not command:
            raise ToolError("empty pdb command")
        if "\n" in command:
            raise ToolError("send one pdb command per call")
        state = pdb_state(ctx, create=True)
        assert state is not None
        if _QUIT.match(command):
            await state.close()
            return "pdb session ended; breakpoints are kept for the next session."
        prefix = ""
        if state.session is None or state.stale or _RESTART.match(command):
            prefix = await self._start(ctx, state)
            if _RESTART.match(command):
                return ctx.to_shown(prefix)
        if (m := _BREAK.match(command)) is not None:
            path = ctx.relative(ctx.path(m.group(1)))
            command = Breakpoint(path, int(m.group(2)), m.group(3)).command()
        try:
            out = await self._send(ctx, state, command)
        except SessionError as exc:
            await state.close()
            raise ToolError(
                f"the pdb session died ({exc}); the next pdb call starts a new one"
            ) from None
        if m is not None and re.search(r"Breakpoint \d+ at", out):
            state.breakpoints.append(
                Breakpoint(ctx.relative(ctx.path(m.group(1))), int(m.group(2)), m.group(3))
            )
        elif (c := _CLEAR.match(command)) is not None:
            state.breakpoints = self._after_clear(state, c.group(1))
        text = f"{prefix}\n{out}" if prefix else out
        return ctx.to_shown(text) or "[no output]"

    @staticmethod
    def _after_clear(state: PdbState, arg: str | None) -> list[Breakpoint]:
        if not arg:
            return []
        m = re.match(r"([^\s:]+):(\d+)", arg.strip())
        if m:
            return [
                b
                for b in state.breakpoints
                if not (b.path.endswith(m.group(1)) and b.line == int(m.group(2)))
            ]
        return state.breakpoints  # by number: keep ours (restarts re-create what pdb still has)


class Eval(Tool):
    spec: ClassVar[ToolSpec] = ToolSpec(
        name="eval",
        description="Run the repository's visible test suite and show the result.",
        parameters=[],
    )

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        return await run_command(ctx, ctx.test_cmd or ctx.settings.test_cmd)


class View(Tool):
    spec: ClassVar[ToolSpec] = ToolSpec(
        name="view",
        description="Show a file with line numbers (lines with a breakpoint are marked B).",
        parameters=[
            ToolParam(name="path", description="File to show.", required=True),
            ToolParam(name="start", type="integer", description="First line (default 1)."),
            ToolParam(name="end", type="integer", description="Last line (default: end of file)."),
        ],
    )

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        raw = self.arg_str(args, "path")
        assert raw is not None
        real = ctx.path(raw)
        info = await probe(ctx, real)
        refuse_special(ctx, real, info)
        if info.kind != "file":
            raise ToolError(f"the path {ctx.shown(real)} does not exist or is not a file")
        n = info.lines
        start = self.arg_int(args, "start") or 1
        end = self.arg_int(args, "end") or n
        if not 1 <= start <= max(n, 1) or end < start:
            raise ToolError(f"invalid range {start}-{end} for a file of {n} lines")
        end = min(end, n)
        lines, _ = await read_lines(ctx, real, info, start, max(end, start))
        end = start + len(lines) - 1 if lines else end
        rel = ctx.relative(real)
        pdb = pdb_state(ctx)
        marks = {b.line for b in (pdb.breakpoints if pdb else []) if b.path == rel}
        body = "\n".join(
            f"{'B' if i in marks else ' '}{i:5d}\t{line}" for i, line in enumerate(lines, start)
        )
        return f"{ctx.shown(real)} (lines {start}-{end} of {n}):\n{body}"


class Edit(Tool):
    spec: ClassVar[ToolSpec] = ToolSpec(
        name="edit",
        description=(
            "Replace lines `start`..`end` (1-based, inclusive) of a file with `new_code` and "
            "show the unified diff. Without `start`, `new_code` replaces the whole file; "
            "without `end`, only line `start` is replaced. Breakpoints below move with the code."
        ),
        parameters=[
            ToolParam(name="path", description="File to edit.", required=True),
            ToolParam(name="new_code", description="The new lines.", required=True),
            ToolParam(name="start", type="integer", description="First line to replace."),
            ToolParam(name="end", type="integer", description="Last line to replace."),
        ],
    )

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        raw = self.arg_str(args, "path")
        new_code = self.arg_str(args, "new_code", required=False, default="") or ""
        assert raw is not None
        real = ctx.path(raw)
        old = await read_text(ctx, real)
        lines = old.split("\n")
        trailing = old.endswith("\n")
        if trailing:
            lines.pop()
        start = self.arg_int(args, "start")
        end = self.arg_int(args, "end")
        new_lines = new_code.split("\n") if new_code else []
        if new_lines and new_lines[-1] == "":
            new_lines.pop()
        if start is None:
            start, end = 1, len(lines)
        end = start if end is None else end
        if not 1 <= start <= len(lines) + 1 or end < start - 1 or end > len(lines):
            raise ToolError(f"invalid line range {start}-{end} for a file of {len(lines)} lines")
        updated_lines = lines[: start - 1] + new_lines + lines[end:]
        updated = "\n".join(updated_lines) + ("\n" if trailing or updated_lines else "")
        if updated == old:
            return "No change: the new code is identical to the replaced lines."
        await write_text(ctx, real, updated, previous=old)
        if (pdb := pdb_state(ctx)) is not None:
            pdb.shift(ctx.relative(real), start, end, len(new_lines))
        rel = ctx.relative(real)
        diff = "".join(
            difflib.unified_diff(
                old.splitlines(keepends=True),
                updated.splitlines(keepends=True),
                f"a/{rel}",
                f"b/{rel}",
            )
        )
        return f"The file {ctx.shown(real)} was edited:\n{diff}"
