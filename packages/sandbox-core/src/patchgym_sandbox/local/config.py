"""Config of the embedded ``local`` backend (cheap to import: no backend code here)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from patchgym_sandbox.backend import BackendConfig, CheckRow

if TYPE_CHECKING:
    from patchgym_sandbox.local.backend import LocalBackend


def default_state_dir() -> Path:
    return Path(tempfile.gettempdir()) / "patchgym-local"


class LocalConfig(BackendConfig):
    """Processes on this machine, a copy-on-write working copy of the template per sandbox."""

    type: Literal["local"] = "local"
    state_dir: Path = Field(default_factory=default_state_dir)
    """Where working copies and lease records live; ``reap`` scans it."""
    copy_mode: Literal["auto", "overlay", "copy"] = "auto"
    """``overlay`` needs root; ``copy`` is ``cp -a --reflink=auto``; ``auto`` tries overlay first."""
    isolation: Literal["bwrap", "gvisor", "none"] = "bwrap"
    """``bwrap`` (default): every sandbox is its own set of namespaces on a minimal root
    (see ``patchgym_sandbox.local.isolation``), limits in cgroups; ``start`` fails with
    IsolationUnavailable naming the fix where bubblewrap cannot run. ``gvisor``: the same
    sandbox under gVisor's ``runsc`` (its own user-space kernel; no network; see
    ``patchgym_sandbox.local.gvisor``); IsolationUnavailable where runsc cannot run. ``none`` runs commands
    as plain processes of this machine: no security boundary; logs a warning once per run."""
    readonly_paths: list[Path] | None = None
    """Host paths bound read-only at the same place inside (e.g. a task's virtualenv);
    None = the running interpreter's installation and virtualenv."""
    python: str | None = None
    """Interpreter (a path visible inside) that runs the in-sandbox exec server;
    None = this interpreter's real executable or, with ``isolation: bwrap``, the system's
    ``/usr/bin/python3`` where it starts the server faster (``local/serverpython.py``).
    Not the tasks' interpreter: theirs is the one their ``PATH`` finds."""
    max_threads: int = Field(default=512, gt=0)

    @field_validator("isolation", mode="before")
    @classmethod
    def _legacy_bool(cls, v: object) -> object:
        """``isolation: true/false`` from before the boundary was the default."""
        if isinstance(v, bool):
            return "bwrap" if v else "none"
        return v

    def checks(self) -> list[CheckRow]:
        """Also whether the isolation runs here (the probe sandbox start itself makes) and
        which cgroup layout the limits will use (found as the backend finds it)."""
        rows = super().checks()
        if self.isolation == "none":
            rows.append(
                CheckRow(
                    name="isolation",
                    status="warn",
                    detail="isolation: none (commands run as the driver's user, no security boundary)",
                    fix="drop sandbox.isolation=none where bubblewrap is installed",
                )
            )
            return rows
        rows.append(self._isolation_row())
        from patchgym_sandbox.local.cgroup_layout import layout

        lay = layout()
        usable = lay.version == "v1" or (lay.parent is not None and not lay.problem)
        fix = "" if usable else "limits that need a missing controller fail at sandbox start"
        rows.append(
            CheckRow(
                name="cgroups", status="pass" if usable else "warn", detail=lay.describe(), fix=fix
            )
        )
        return rows

    def _isolation_row(self) -> CheckRow:
        from patchgym_sandbox.errors import IsolationUnavailable
        from patchgym_sandbox.local import gvisor, isolation

        if self.isolation == "bwrap":
            probe, fix = isolation.bwrap_path, isolation.FIX
        else:
            probe, fix = gvisor.runsc_path, gvisor.FIX
        try:
            path = probe()
        except IsolationUnavailable as exc:
            detail = str(exc).removesuffix(f": {fix}")
            return CheckRow(name="isolation", status="fail", detail=detail, fix=fix)
        return CheckRow(
            name="isolation", status="pass", detail=f"{self.isolation}: {path} starts a sandbox"
        )

    def build(self) -> LocalBackend:
        from patchgym_sandbox.local.backend import LocalBackend

        return LocalBackend(self)
