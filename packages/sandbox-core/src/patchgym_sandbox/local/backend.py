"""The ``local`` backend: a copy-on-write working copy and process groups on this machine."""

from __future__ import annotations

import asyncio
import io
import os
import posixpath
import tarfile
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from patchgym_sandbox import labels as L
from patchgym_sandbox.backend import SandboxBackend, SandboxInfo
from patchgym_sandbox.errors import ConfigError, SandboxFileNotFound, SandboxLost
from patchgym_sandbox.local import records, workcopy
from patchgym_sandbox.local.config import LocalConfig
from patchgym_sandbox.local.isolation import bwrap_path, bwrap_prefix
from patchgym_sandbox.local.limits import preexec_for
from patchgym_sandbox.local.shell import PtyChannel
from patchgym_sandbox.output import OutputCapture
from patchgym_sandbox.result import ExecResult
from patchgym_sandbox.sandbox import ExecRequest, Sandbox
from patchgym_sandbox.session import ShellChannel
from patchgym_sandbox.spec import SandboxSpec
from patchgym_sandbox.supervisor import kill_tree, supervise

SANDBOX_TOKEN = "PATCHGYM_SANDBOX"
NOT_RUN = {"exit_code": 127, "timed_out": False, "idle_timed_out": False, "duration_s": 0.0}


class LocalBackend(SandboxBackend):
    name = "local"
    config: LocalConfig

    def __init__(self, config: LocalConfig) -> None:
        super().__init__(config)
        self.config.state_dir.mkdir(parents=True, exist_ok=True)
        self._executor: ThreadPoolExecutor | None = None
        self._overlay: bool | None = None
        self._overlay_lock = threading.Lock()
        if config.isolation:
            bwrap_path()

    def executor(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.config.max_threads, "patchgym-local")
        return self._executor

    def use_overlay(self) -> bool:
        """Decided once per backend (sandboxes are provisioned from many threads at once)."""
        with self._overlay_lock:
            if self._overlay is None:
                mode = self.config.copy_mode
                self._overlay = mode == "overlay" or (
                    mode == "auto" and workcopy.overlay_supported(self.config.state_dir)
                )
            return self._overlay

    def _make_sandbox(self, spec: SandboxSpec) -> LocalSandbox:
        return LocalSandbox(self, spec)

    async def list_sandboxes(self, labels: Mapping[str, str] | None = None) -> list[SandboxInfo]:
        recs = await asyncio.to_thread(records.read_all, self.config.state_dir)
        return [
            SandboxInfo(id=r.id, labels=r.labels, state="present")
            for r in recs
            if not labels or L.matches(r.labels, labels)
        ]

    async def remove(self, sandbox_id: str) -> None:
        await asyncio.to_thread(remove_sandbox, self.config.state_dir, sandbox_id)

    async def aclose(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


def remove_sandbox(state_dir: Path, sandbox_id: str) -> None:
    """Kill every process of the sandbox, unmount and delete its directory."""
    kill_tree(None, SANDBOX_TOKEN, sandbox_id)
    base = state_dir / sandbox_id
    workcopy.unmount(base / "root")
    workcopy.remove_tree(base)


class LocalSandbox(Sandbox):
    backend_name = "local"

    def __init__(self, backend: LocalBackend, spec: SandboxSpec) -> None:
        super().__init__(spec)
        self._backend = backend
        self._base = backend.config.state_dir / self.id
        self._root = self._base / "root"
        self._tmp = self._base / "tmp"
        self._isolated = backend.config.isolation
        self._channels: list[ShellChannel] = []

    # -- paths: inside the sandbox vs on this machine ---------------------------
    @property
    def workdir(self) -> str:
        return posixpath.normpath(self.spec.workdir) if self._isolated else str(self._root)

    @property
    def host_root(self) -> Path:
        """The working copy on this machine (equal to ``workdir`` without isolation)."""
        return self._root

    @property
    def host_tmp(self) -> Path:
        """The sandbox's private /tmp (TMPDIR) on this machine."""
        return self._tmp

    def file_roots(self) -> Sequence[str]:
        return (self.workdir, "/tmp") if self._isolated else (str(self._base),)

    def _host(self, path: str) -> Path:
        if not self._isolated:
            return Path(path)
        for inside, outside in ((self.workdir, self._root), ("/tmp", self._tmp)):
            if path == inside or path.startswith(inside.rstrip("/") + "/"):
                return outside / path[len(inside) :].lstrip("/")
        raise AssertionError(path)  # resolve() already refused it

    # -- lifecycle ---------------------------------------------------------------
    async def _start(self) -> None:
        if self.spec.user is not None:
            raise ConfigError("the local backend cannot switch users; leave `user` unset")
        template = Path(self.spec.template).resolve() if self.spec.template else None
        if template is not None and not template.is_dir():
            raise ConfigError(f"local template {self.spec.template!r} is not a directory")
        await asyncio.to_thread(self._provision, template)

    def _provision(self, template: Path | None) -> None:
        state_dir = self._backend.config.state_dir
        self._base.mkdir(parents=True)
        for d in ("tmp", "home"):
            (self._base / d).mkdir()
        rec = records.Record(id=self.id, root=str(self._root), labels=self.spec.all_labels(self.id))
        records.write(state_dir, rec)
        if template is None:
            self._root.mkdir()
        elif self._backend.use_overlay():
            for d in ("root", "upper", "ovl-work"):
                (self._base / d).mkdir()
            workcopy.mount_overlay(
                template, self._base / "upper", self._base / "ovl-work", self._root
            )
            rec.mounted = True
            records.write(state_dir, rec)
        else:
            workcopy.copy_tree(template, self._root)

    async def _close(self) -> None:
        for chan in self._channels:
            await chan.close()
        self._channels.clear()
        await asyncio.to_thread(remove_sandbox, self._backend.config.state_dir, self.id)

    async def _renew(self, lease_s: float) -> None:
        rec = records.read(self._backend.config.state_dir, self.id)
        if rec is not None:
            rec.labels[L.EXPIRES_AT] = str(L.expires_at(lease_s))
            records.write(self._backend.config.state_dir, rec)

    # -- commands ----------------------------------------------------------------
    def _env(self, extra: Mapping[str, str]) -> dict[str, str]:
        tmp = "/tmp" if self._isolated else str(self._tmp)
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": tmp if self._isolated else str(self._base / "home"),
            "TMPDIR": tmp,
            "TERM": "dumb",
            SANDBOX_TOKEN: self.id,
        }
        env.update(extra)
        return env

    def _prefix(self, cwd: str, *, new_session: bool) -> list[str]:
        if not self._isolated:
            return []
        return bwrap_prefix(
            root=self._root,
            workdir=self.workdir,
            tmp=self._tmp,
            cwd=cwd,
            network=self.spec.network,
            new_session=new_session,
            mounts=tuple(self.spec.mounts),
        )

    def _check_alive(self) -> None:
        if not self._base.is_dir():
            raise SandboxLost(f"local sandbox {self.id} was removed from outside (reaped?)")

    async def _exec(self, req: ExecRequest) -> ExecResult:
        self._check_alive()
        if req.user is not None:
            raise ConfigError("the local backend cannot switch users; leave `user` unset")
        capture = OutputCapture(req.max_output_bytes)
        cwd = req.cwd if not self._isolated else str(self._root)
        if not Path(self._host(req.cwd)).is_dir():
            msg = f"patchgym: working directory {req.cwd} does not exist\n".encode()
            capture.feed(2, msg)
            return capture.result(NOT_RUN)
        run = partial(
            supervise,
            req.cmd,
            capture.feed,
            cwd=cwd,
            env=self._env(req.env),
            timeout=req.timeout,
            idle_timeout=req.idle_timeout,
            stdin=req.stdin,
            preexec_fn=preexec_for(self.spec.resources),
            argv_prefix=tuple(self._prefix(req.cwd, new_session=True)),
        )
        status = await asyncio.get_running_loop().run_in_executor(self._backend.executor(), run)
        return capture.result(status)

    async def _open_shell(self, cwd: str, env: Mapping[str, str]) -> ShellChannel:
        self._check_alive()
        host_cwd = str(self._root) if self._isolated else cwd
        chan = await PtyChannel.spawn(
            host_cwd, self._env(env), self._prefix(cwd, new_session=False)
        )
        self._channels.append(chan)
        return chan

    # -- files ---------------------------------------------------------------------
    async def _write_file(self, path: str, data: bytes, mode: int) -> None:
        self._check_alive()

        def write() -> None:
            target = self._host(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(mode)

        await asyncio.to_thread(write)

    async def _read_file(self, path: str) -> bytes:
        self._check_alive()
        target = self._host(path)
        try:
            return await asyncio.to_thread(target.read_bytes)
        except (FileNotFoundError, IsADirectoryError) as exc:
            raise SandboxFileNotFound(f"no file {path!r} in sandbox {self.id}") from exc

    async def _put_archive(self, dest_dir: str, data: bytes) -> None:
        self._check_alive()

        def extract() -> None:
            target = self._host(dest_dir)
            target.mkdir(parents=True, exist_ok=True)
            with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
                tar.extractall(target, filter="tar")

        await asyncio.to_thread(extract)

    async def _get_archive(self, path: str) -> bytes:
        def pack() -> bytes:
            src = self._host(path)
            if not src.exists():
                raise SandboxFileNotFound(f"no file or directory {path!r} in sandbox {self.id}")
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tar:
                tar.add(str(src), arcname=src.name)
            return buf.getvalue()

        return await asyncio.to_thread(pack)
