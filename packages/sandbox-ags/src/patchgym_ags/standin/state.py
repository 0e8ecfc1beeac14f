"""Stand-in sandboxes: each one is a ``local`` backend sandbox plus its envd state."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from patchgym_ags.standin.config import StandinConfig
from patchgym_ags.standin.paths import PathMap
from patchgym_ags.standin.procs import ManagedProcess, host_view, sandbox_argv
from patchgym_sandbox.local.backend import LocalBackend, LocalSandbox
from patchgym_sandbox.local.config import LocalConfig
from patchgym_sandbox.spec import SandboxSpec


class TemplateNotFound(LookupError):
    pass


@dataclass(eq=False)
class StandinSandbox:
    id: str
    template: str
    metadata: dict[str, str]
    env_vars: dict[str, str]
    network: bool
    access_token: str
    local: LocalSandbox
    started_at: float
    end_at: float
    paths: PathMap
    procs: dict[int, ManagedProcess] = field(default_factory=dict)

    def iso(self, t: float) -> str:
        return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")

    def base_env(self) -> dict[str, str]:
        return {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG": "C.UTF-8",
            "HOME": "/tmp",
            "TMPDIR": "/tmp",
            "TERM": "xterm",
            "E2B_SANDBOX": "true",
            "E2B_SANDBOX_ID": self.id,
            **self.env_vars,
        }

    def prefix(self, cwd: str, *, new_session: bool) -> list[str]:
        return sandbox_argv(
            workdir=self.paths.workdir,
            root=str(self.paths.root),
            tmp=str(self.paths.tmp),
            cwd=cwd,
            network=self.network,
            new_session=new_session,
            view=host_view({"proc", "dev", "tmp", self.paths.workdir.strip("/").split("/", 1)[0]}),
        )

    def listed(self, envd_version: str) -> dict[str, Any]:
        return {
            "templateID": self.template,
            "alias": self.template,
            "sandboxID": self.id,
            "clientID": "standin",
            "startedAt": self.iso(self.started_at),
            "endAt": self.iso(self.end_at),
            "cpuCount": 2,
            "memoryMB": 1024,
            "diskSizeMB": 1024,
            "metadata": self.metadata,
            "state": "running",
            "envdVersion": envd_version,
        }


class Registry:
    """All live stand-in sandboxes; the local backend provisions and removes them."""

    def __init__(self, config: StandinConfig) -> None:
        self.config = config
        config.state_dir.mkdir(parents=True, exist_ok=True)
        self.local = LocalBackend(LocalConfig(state_dir=config.state_dir, isolation="bwrap"))
        self.sandboxes: dict[str, StandinSandbox] = {}
        self.idempotency: dict[tuple[str, str], str] = {}
        self.create_attempts: list[float] = []
        self._reaper: asyncio.Task[None] | None = None

    def resolve_template(self, template: str, image: str | None) -> Path | None:
        if image is not None:
            if image not in self.config.images:
                raise TemplateNotFound(
                    f"image {image!r} is not available (stand-in images: {sorted(self.config.images)})"
                )
            return self.config.images[image]
        if template not in self.config.templates:
            raise TemplateNotFound(
                f"template {template!r} was not found (stand-in templates: {sorted(self.config.templates)})"
            )
        return self.config.templates[template]

    async def create(
        self, *, template: str, image: str | None, timeout_s: int, metadata: dict[str, str],
        env_vars: dict[str, str], network: bool,
    ) -> StandinSandbox:  # fmt: skip
        source = self.resolve_template(template, image)
        spec = SandboxSpec(
            template=str(source) if source else None,
            workdir=self.config.workdir,
            lease_s=max(1, timeout_s),
        )
        local = self.local.sandbox(spec)
        assert isinstance(local, LocalSandbox)
        await local.start()
        sid = "i" + uuid.uuid4().hex[:19]
        now = time.time()
        sbx = StandinSandbox(
            id=sid,
            template=template,
            metadata=dict(metadata),
            env_vars=dict(env_vars),
            network=network,
            access_token=secrets.token_hex(16),
            local=local,
            started_at=now,
            end_at=now + timeout_s,
            paths=PathMap(self.config.workdir, local.host_root, local.host_tmp),
        )
        self.sandboxes[sid] = sbx
        self._ensure_reaper()
        return sbx

    async def kill(self, sid: str) -> bool:
        sbx = self.sandboxes.pop(sid, None)
        if sbx is None:
            return False
        message = f"The sandbox {sid} was not found"
        for proc in list(sbx.procs.values()):
            proc.lose(message)
        await sbx.local.close()
        return True

    def _ensure_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    async def _reap_forever(self) -> None:
        while self.sandboxes:
            now = time.time()
            for sid in [s.id for s in self.sandboxes.values() if s.end_at <= now]:
                await self.kill(sid)
            await asyncio.sleep(0.25)

    async def close(self) -> None:
        for sid in list(self.sandboxes):
            with contextlib.suppress(Exception):
                await self.kill(sid)
        if self._reaper is not None:
            self._reaper.cancel()
        await self.local.aclose()
