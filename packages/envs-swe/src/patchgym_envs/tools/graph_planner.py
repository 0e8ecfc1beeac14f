"""The ``graph-planner`` scaffold's tools: ``explore``, ``memory``, ``repair``, ``submit``.

- ``explore`` queries a code graph built inside the sandbox (see
  :mod:`patchgym_envs.graph`) and returns a bounded subgraph with snippets.
- ``memory`` records / revises / drops findings; the memory is appended to every
  observation of these tools, so the latest observation always carries it (it survives
  the agent's context elision, which never touches the latest turns).
- ``repair`` applies a unified diff (``git apply``) or search/replace edits (each search
  text must occur exactly once; all are checked before any file is written), rebuilds the
  graph incrementally and runs the visible tests that import the target nodes (the
  task's test command when the graph knows none).
- ``submit`` ends the episode.

Arguments are validated by the pydantic models in :mod:`patchgym_envs.graph.actions`.
"""

from __future__ import annotations

import shlex
from typing import Any, ClassVar

from patchgym_envs.graph.actions import (
    ExploreAction,
    MemoryAction,
    RepairAction,
    parse_action,
    tool_parameters_schema,
)
from patchgym_envs.graph.session import GraphSession, render_subgraph
from patchgym_envs.tools.base import Tool, ToolError, ToolParam, ToolSpec
from patchgym_envs.tools.bounded import FILE_REFUSALS, MAX_EDIT_BYTES, read_capped, refusal
from patchgym_envs.tools.context import ToolContext
from patchgym_envs.tools.shell import format_result
from patchgym_envs.tools.submit import Submit

REPAIR_PATCH = "repair.patch"
TEST_TIMEOUT_S = 300.0


class ActionToolSpec(ToolSpec):
    """A tool spec whose function-calling schema comes from the action's pydantic model."""

    def json_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": tool_parameters_schema(self.name),
            },
        }


class GraphTool(Tool):
    """A tool sharing one :class:`GraphSession` with its siblings; appends the memory."""

    def __init__(self, session: GraphSession) -> None:
        self.session = session

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        session = self.session.bind(ctx)
        try:
            action = parse_action(self.name, args)
        except ValueError as exc:
            raise ToolError(f"{exc}\n\n{session.render_memory()}") from None
        text = await self.act(ctx, session, action)
        return f"{text}\n\n{session.render_memory()}"

    async def act(self, ctx: ToolContext, session: GraphSession, action: Any) -> str:
        raise NotImplementedError


class Explore(GraphTool):
    spec: ClassVar[ToolSpec] = ActionToolSpec(
        name="explore",
        description=(
            "Query the repository's code graph (modules, classes, functions, methods; edges "
            "contains/imports/calls/tests). op=name: nodes whose name or file matches query; "
            "op=text: nodes whose source contains query; op=neighbours|callers|callees|tests: "
            "around the node id in query (tests = the test functions that import or call it). "
            "Returns at most `limit` nodes with code snippets."
        ),
        parameters=[
            ToolParam(
                name="op",
                description="Query kind.",
                enum=["name", "text", "neighbours", "callers", "callees", "tests"],
            ),
            ToolParam(name="query", description="Name, text or node id.", required=True),
            ToolParam(name="depth", type="integer", description="Hops for graph ops (1-3)."),
            ToolParam(name="limit", type="integer", description="Most nodes returned (1-30)."),
        ],
    )

    async def act(self, ctx: ToolContext, session: GraphSession, action: ExploreAction) -> str:
        q: dict[str, Any] = {
            "op": action.op,
            "query": action.query,
            "depth": action.depth,
            "limit": action.limit,
        }
        if action.op not in ("name", "text"):
            q["node"] = action.query
        return render_subgraph(await session.query(ctx, q))


class Memory(GraphTool):
    spec: ClassVar[ToolSpec] = ActionToolSpec(
        name="memory",
        description=(
            "Keep findings across the episode: op=record (note, optional nodes), op=revise "
            "(key, note), op=drop (key). The memory is shown after every observation."
        ),
        parameters=[
            ToolParam(name="op", description="What to do.", enum=["record", "revise", "drop"]),
            ToolParam(name="note", description="The finding (record / revise)."),
            ToolParam(name="key", description="Entry key like m1 (revise / drop)."),
            ToolParam(name="nodes", type="array", description="Node ids the finding is about."),
        ],
    )

    async def act(self, ctx: ToolContext, session: GraphSession, action: MemoryAction) -> str:
        if action.op == "record":
            entry = session.record(action.note or "", list(action.nodes))
            return f"recorded {entry.key}"
        entry = session.find(action.key or "")
        if action.op == "revise":
            entry.note = (action.note or "").strip()
            if action.nodes:
                entry.nodes = list(action.nodes)
            return f"revised {entry.key}"
        session.memory.remove(entry)
        return f"dropped {entry.key}"


class Repair(GraphTool):
    spec: ClassVar[ToolSpec] = ActionToolSpec(
        name="repair",
        description=(
            "Fix the code: name the target node ids, a short plan, and either a unified diff "
            "(paths relative to the repository) or search/replace edits (each search text must "
            "occur exactly once in its file). The change is applied, the graph is rebuilt and "
            "the visible tests that import the targets are run. Without diff and edits it only "
            "runs those tests."
        ),
        parameters=[
            ToolParam(name="targets", type="array", description="Node ids.", required=True),
            ToolParam(name="plan", description="What is wrong and how this fixes it."),
            ToolParam(name="diff", description="A unified diff."),
            ToolParam(
                name="edits",
                type="array",
                description='Search/replace edits: [{"path", "search", "replace"}].',
            ),
        ],
    )

    async def act(self, ctx: ToolContext, session: GraphSession, action: RepairAction) -> str:
        out: list[str] = []
        if action.diff:
            out.append(await self._apply_diff(ctx, session, action.diff))
        elif action.edits:
            out.append(await self._apply_edits(ctx, action))
        else:
            out.append("no change given: running the tests of the targets only")
        stats = await session.build(ctx)
        out.append(f"graph rebuilt: {stats.parsed} file(s) re-parsed, {stats.nodes} nodes")
        if stats.errors:
            out.append(
                "WARNING: files that no longer parse: "
                + "; ".join(f"{k}: {v}" for k, v in stats.errors.items())
            )
        if action.run_tests:
            out.append(await self._run_tests(ctx, session, action.targets))
        return "\n".join(out)

    async def _apply_diff(self, ctx: ToolContext, session: GraphSession, diff: str) -> str:
        base = await session.ensure_script(ctx)
        patch = diff if diff.endswith("\n") else diff + "\n"
        path = f"{base}/{REPAIR_PATCH}"
        try:
            await ctx.sandbox.write_file(path, ctx.to_real(patch))
        except FILE_REFUSALS as exc:
            raise refusal(ctx, path, exc) from None
        cmd = f"git apply --whitespace=nowarn --recount {shlex.quote(path)}"
        res = await ctx.sandbox.exec(cmd, timeout=60)
        if res.exit_code != 0:
            raise ToolError(
                "the diff did not apply (nothing was changed): "
                f"{ctx.to_shown(res.output.strip()[-1500:])}\n"
                "Use paths relative to the repository, exact context lines, or search/replace edits."
            )
        stat = await ctx.sandbox.exec(f"git apply --numstat {shlex.quote(path)}", timeout=30)
        return "diff applied (git apply)" + (
            f":\n{stat.stdout.strip()}" if stat.ok and stat.stdout.strip() else ""
        )

    async def _apply_edits(self, ctx: ToolContext, action: RepairAction) -> str:
        staged: dict[str, str] = {}
        for i, edit in enumerate(action.edits, 1):
            real = ctx.path(edit.path)
            if real not in staged:
                try:
                    data = await read_capped(ctx, real, MAX_EDIT_BYTES)
                except ToolError as exc:
                    raise ToolError(f"edit {i}: {exc} (nothing was changed)") from None
                staged[real] = data.decode("utf-8", errors="replace")
            count = staged[real].count(edit.search)
            if count != 1:
                where = "does not occur" if count == 0 else f"occurs {count} times"
                raise ToolError(
                    f"edit {i}: the search text {where} in {edit.path} (nothing was changed); "
                    "it must match exactly once, whitespace included"
                )
            staged[real] = staged[real].replace(edit.search, edit.replace, 1)
        for real, text in staged.items():
            try:
                await ctx.sandbox.write_file(real, text)
            except FILE_REFUSALS as exc:
                raise refusal(ctx, real, exc) from None
        names = ", ".join(ctx.relative(r) for r in staged)
        return f"{len(action.edits)} edit(s) applied to {names}"

    async def _run_tests(self, ctx: ToolContext, session: GraphSession, targets: list[str]) -> str:
        files: list[str] = []
        unknown: list[str] = []
        for target in targets:
            try:
                sub = await session.query(
                    ctx, {"op": "tests", "node": target, "query": target, "limit": 50}
                )
            except ToolError:
                unknown.append(target)
                continue
            for n in sub.nodes:
                if n.test and n.file not in files:
                    files.append(n.file)
        note = f"unknown target node(s): {', '.join(unknown)}\n" if unknown else ""
        base_cmd = ctx.settings.test_cmd
        if files:
            cmd = f"{base_cmd} " + " ".join(shlex.quote(f) for f in files)
            label = f"tests importing the targets ({', '.join(files)})"
        else:
            cmd = ctx.test_cmd or base_cmd
            label = "the visible tests (no test imports the targets)"
        limit = min(TEST_TIMEOUT_S, ctx.settings.step_timeout_s)
        res = await ctx.sandbox.exec(ctx.to_real(cmd), timeout=limit)
        verdict = "PASSED" if res.ok else "FAILED"
        return f"{note}ran {label}: {verdict}\n$ {cmd}\n{format_result(ctx, res, limit)}"


def graph_planner_tools() -> list[Tool]:
    session = GraphSession()
    return [Explore(session), Memory(session), Repair(session), Submit()]
