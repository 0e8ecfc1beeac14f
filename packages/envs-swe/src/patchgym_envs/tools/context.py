"""Per-episode state the tools share: the sandbox, path mapping, edit history, tool state.

Paths: the model sees the task's workdir (``/testbed``). On backends whose real workdir
differs (the local backend without isolation), :meth:`ToolContext.to_real` maps paths
and commands onto the real folder and :meth:`ToolContext.to_shown` maps output back, so
the model sees the same world on every backend.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any, Protocol

from patchgym_sandbox import Sandbox


class ToolState(Protocol):
    """What a tool keeps across steps (debug-gym's pdb session); the context knows only this."""

    def files_changed(self) -> None:
        """A command or an edit may have changed files in the sandbox."""

    async def close(self) -> None: ...


def _env_default(name: str) -> Any:
    from patchgym_envs.config import default_of  # config imports the tools package

    return default_of(name)


@dataclass
class ToolSettings:
    """The tools' share of :class:`~patchgym_envs.config.EnvConfig` (same names, same defaults)."""

    max_observation_chars: int = field(
        default_factory=lambda: _env_default("max_observation_chars")
    )
    """Observation size bound (head and tail kept)."""
    step_timeout_s: float = field(default_factory=lambda: _env_default("step_timeout_s"))
    """Deadline of one tool command (the exec request's ``timeout``)."""
    tool_timeout_s: float | None = field(default_factory=lambda: _env_default("tool_timeout_s"))
    """Deadline of one whole tool call; ``None``: see :attr:`tool_deadline_s`."""
    blocked_commands: tuple[str, ...] = ()
    test_cmd: str = "python3 -m pytest -q -p no:cacheprovider"
    """What debug-gym's ``eval`` and ``pdb`` run when the task names no visible test command."""

    @property
    def tool_deadline_s(self) -> float:
        """``tool_timeout_s``, or by default room for a few commands: 3 × step + 60 s."""
        if self.tool_timeout_s is not None:
            return self.tool_timeout_s
        return 3 * self.step_timeout_s + 60.0


@dataclass
class ToolContext:
    sandbox: Sandbox
    shown_workdir: str = "/testbed"
    settings: ToolSettings = field(default_factory=ToolSettings)
    test_cmd: str | None = None
    history: dict[str, list[str]] = field(default_factory=dict)
    """Path (real) -> earlier contents, for ``undo_edit``."""
    tool_state: dict[str, ToolState] = field(default_factory=dict)
    """State of stateful tools, keyed by tool name."""

    def files_changed(self) -> None:
        for state in self.tool_state.values():
            state.files_changed()

    async def close_tool_state(self) -> None:
        states, self.tool_state = list(self.tool_state.values()), {}
        for state in states:
            await state.close()

    @property
    def workdir(self) -> str:
        return self.sandbox.workdir

    @property
    def remaps(self) -> bool:
        return posixpath.normpath(self.workdir) != posixpath.normpath(self.shown_workdir)

    def path(self, raw: str) -> str:
        """A path as the model wrote it -> an absolute path inside the sandbox."""
        p = raw.strip()
        shown = posixpath.normpath(self.shown_workdir)
        if p == shown or p.startswith(shown + "/"):
            p = self.workdir + p[len(shown) :]
        elif not posixpath.isabs(p):
            p = posixpath.join(self.workdir, p)
        return posixpath.normpath(p)

    def shown(self, real_path: str) -> str:
        return self.to_shown(real_path)

    def to_real(self, text: str) -> str:
        """Rewrite mentions of the shown workdir in a command to the real one."""
        return text.replace(self.shown_workdir, self.workdir) if self.remaps else text

    def to_shown(self, text: str) -> str:
        """Rewrite the real workdir in output to the shown one."""
        return text.replace(self.workdir, self.shown_workdir) if self.remaps else text

    def relative(self, real_path: str) -> str:
        return posixpath.relpath(real_path, self.workdir)
