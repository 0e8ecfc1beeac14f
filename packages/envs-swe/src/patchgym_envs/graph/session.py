"""Per-episode state of the graph-planner tools: the in-sandbox graph script and the memory.

The script (:mod:`patchgym_envs.graph.codegraph_script`, stdlib only) is uploaded into
the repository's git directory (``.git/patchgym/``, so it never shows up in the patch)
the first time a tool needs it; every query rebuilds the graph incrementally there (only
files whose stamp and hash changed are parsed again) and answers inside the sandbox, so
only the bounded subgraph crosses the wire.

One :class:`GraphSession` is shared by the tools of one scaffold instance; it starts
afresh whenever it sees a new :class:`ToolContext` (a new episode's sandbox).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from pydantic import BaseModel, Field

from patchgym_envs.tools.base import ToolError
from patchgym_envs.tools.context import ToolContext

SCRIPT_NAME = "codegraph_script.py"


def script_source() -> str:
    """The in-sandbox graph builder's source text."""
    return resources.files("patchgym_envs.graph").joinpath(SCRIPT_NAME).read_text("utf-8")


class GraphNode(BaseModel):
    id: str
    kind: str
    file: str
    start: int
    end: int
    test: bool = False
    snippet: str = ""
    degree: int = 0


class GraphStats(BaseModel):
    files: int = 0
    parsed: int = 0
    reused: int = 0
    lines: int = 0
    nodes: int = 0
    edges: int = 0
    errors: dict[str, str] = Field(default_factory=dict)
    build_ms: float = 0.0


class Subgraph(BaseModel):
    """What one explore query returned (bounded)."""

    op: str
    query: str = ""
    total: int = 0
    nodes: list[GraphNode] = Field(default_factory=list)
    edges: list[tuple[str, str, str]] = Field(default_factory=list)
    stats: GraphStats = Field(default_factory=GraphStats)


class MemoryEntry(BaseModel):
    key: str
    note: str
    nodes: list[str] = Field(default_factory=list)


@dataclass
class GraphSession:
    ctx: ToolContext | None = None
    memory: list[MemoryEntry] = field(default_factory=list)
    next_key: int = 1
    base: str | None = None
    """Folder in the sandbox (real path) holding the script and its cache."""
    last_stats: GraphStats | None = None

    def bind(self, ctx: ToolContext) -> GraphSession:
        """Start afresh for a new episode (a new context)."""
        if self.ctx is not ctx:
            self.ctx = ctx
            self.memory = []
            self.next_key = 1
            self.base = None
            self.last_stats = None
        return self

    # -- the script ---------------------------------------------------------------------
    async def ensure_script(self, ctx: ToolContext) -> str:
        if self.base is not None:
            return self.base
        res = await ctx.sandbox.exec("git rev-parse --absolute-git-dir", timeout=30)
        if res.exit_code != 0 or not res.stdout.strip():
            raise ToolError(
                "the code graph needs the repository to be a git checkout "
                f"(git rev-parse failed: {res.output.strip()[:200]})"
            )
        base = res.stdout.strip().splitlines()[-1] + "/patchgym"
        await ctx.sandbox.write_file(f"{base}/{SCRIPT_NAME}", script_source())
        self.base = base
        return base

    async def run_script(self, ctx: ToolContext, command: str, *extra: str) -> Any:
        base = await self.ensure_script(ctx)
        argv = ["python3", f"{base}/{SCRIPT_NAME}", command, ctx.workdir, f"{base}/cache", *extra]
        res = await ctx.sandbox.exec(
            " ".join(shlex.quote(a) for a in argv), timeout=ctx.settings.step_timeout_s
        )
        if res.exit_code != 0:
            raise ToolError(
                f"the code graph script failed (exit {res.exit_code}): "
                f"{ctx.to_shown(res.output.strip()[-800:])}"
            )
        try:
            return json.loads(res.stdout)
        except json.JSONDecodeError:
            raise ToolError(
                f"the code graph script printed something that is not JSON: {res.output[:300]!r}"
            ) from None

    async def build(self, ctx: ToolContext) -> GraphStats:
        stats = GraphStats.model_validate(await self.run_script(ctx, "build"))
        self.last_stats = stats
        return stats

    async def query(self, ctx: ToolContext, q: dict[str, Any]) -> Subgraph:
        data = await self.run_script(ctx, "query", json.dumps(q))
        if "error" in data:
            raise ToolError(str(data["error"]))
        sub = Subgraph.model_validate(data)
        self.last_stats = sub.stats
        return sub

    # -- memory -----------------------------------------------------------------------------
    def record(self, note: str, nodes: list[str]) -> MemoryEntry:
        entry = MemoryEntry(key=f"m{self.next_key}", note=note.strip(), nodes=nodes)
        self.next_key += 1
        self.memory.append(entry)
        return entry

    def find(self, key: str) -> MemoryEntry:
        for entry in self.memory:
            if entry.key == key.strip():
                return entry
        known = ", ".join(e.key for e in self.memory) or "none yet"
        raise ToolError(f"no memory entry {key!r}; entries: {known}")

    def render_memory(self) -> str:
        if not self.memory:
            return "## Memory (empty)\nRecord findings with the memory action; they are shown here in every observation."
        lines = [f"## Memory ({len(self.memory)})"]
        for e in self.memory:
            about = f"  (nodes: {', '.join(e.nodes)})" if e.nodes else ""
            lines.append(f"[{e.key}] {e.note}{about}")
        return "\n".join(lines)


def render_subgraph(sub: Subgraph) -> str:
    """An explore result as text: nodes (``• id [kind] file:start-end``), snippets, edges."""
    st = sub.stats
    head = (
        f"explore op={sub.op} query={sub.query!r}: {len(sub.nodes)} of {sub.total} node(s) "
        f"(graph: {st.nodes} nodes, {st.edges} edges, {st.files} files; "
        f"{st.parsed} file(s) re-parsed in {st.build_ms:g} ms)"
    )
    if not sub.nodes:
        return head + "\nNo matching nodes. Try another name, op=text, or a shorter query."
    lines = [head]
    for n in sub.nodes:
        tag = ", test" if n.test else ""
        lines.append(f"• {n.id} [{n.kind}{tag}] {n.file}:{n.start}-{n.end} (degree {n.degree})")
        if n.snippet:
            lines.append(n.snippet)
    if sub.edges:
        lines.append("edges:")
        lines.extend(f"  {a} -{k}-> {b}" for a, b, k in sub.edges[:40])
        if len(sub.edges) > 40:
            lines.append(f"  ... {len(sub.edges) - 40} more edges")
    if sub.total > len(sub.nodes):
        lines.append(
            f"[{sub.total - len(sub.nodes)} more node(s); raise 'limit' or narrow the query]"
        )
    return "\n".join(lines)
