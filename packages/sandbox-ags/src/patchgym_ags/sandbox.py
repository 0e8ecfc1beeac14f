"""One cloud sandbox driven through the e2b SDK; commands run under the in-sandbox supervisor."""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

import e2b
from e2b import AsyncSandbox

from patchgym_ags import archive
from patchgym_ags.envd import EnvdProcesses, Outcome
from patchgym_ags.errors import map_runtime_error, scrub
from patchgym_ags.execd_client import EXECD_PATH, ExecDaemon, execd_source
from patchgym_ags.shell import EnvdPtyChannel
from patchgym_sandbox.errors import (
    FileTooLarge,
    InfraError,
    NotARegularFile,
    SandboxFileNotFound,
    SandboxLost,
)
from patchgym_sandbox.remote import SUPERVISOR_PATH, FrameDecoder, remote_argv, supervisor_source
from patchgym_sandbox.result import ExecResult
from patchgym_sandbox.sandbox import ExecRequest, Sandbox
from patchgym_sandbox.session import ShellChannel
from patchgym_sandbox.spec import SandboxSpec

if TYPE_CHECKING:
    from patchgym_ags.backend import AgsBackend

RENEW_MARGIN_S = 60.0
_NOT_REGULAR = 67
_SIZE_OF_REGULAR = '[ -e "$1" ] || exit 0; [ -f "$1" ] || exit 67; exec stat -L -c %s -- "$1"'  # the target's size, never the link's; a FIFO is never opened


class AgsSandbox(Sandbox):
    backend_name = "ags"

    def __init__(self, backend: AgsBackend, spec: SandboxSpec) -> None:
        super().__init__(spec)
        self._backend = backend
        self._sbx: AsyncSandbox | None = None
        self._procs: EnvdProcesses | None = None
        self._ends_at = 0.0
        self._channels: list[ShellChannel] = []
        self._daemons: dict[str | None, ExecDaemon] = {}

    @property
    def remote_id(self) -> str | None:
        """The provider's sandbox id (ours is ``self.id``, stamped as a label)."""
        return self._sbx.sandbox_id if self._sbx is not None else None

    def _live(self) -> AsyncSandbox:
        if self._sbx is None:
            raise InfraError(f"sandbox {self.id} has no remote sandbox")
        return self._sbx

    def _envd(self) -> EnvdProcesses:
        if self._procs is None:
            self._procs = EnvdProcesses(self._live())
        return self._procs

    # -- lifecycle ----------------------------------------------------------------
    async def _start(self) -> None:
        self._sbx = await self._backend.create(self.spec, self.id)
        self._ends_at = time.monotonic() + self._backend.timeout_for(self.spec.lease_s)
        uploads = [
            self._sbx.files.write(SUPERVISOR_PATH, supervisor_source()),
            self._sbx.files.make_dir(self.spec.workdir),
        ]
        if self._backend.config.exec_via == "execd":
            uploads.append(self._sbx.files.write(EXECD_PATH, execd_source()))
        try:
            await asyncio.gather(*uploads)
        except Exception as exc:
            raise await self._lost_or(exc, "prepare sandbox") from None

    async def _close(self) -> None:
        for chan in self._channels:
            with contextlib.suppress(Exception):
                await chan.close()
        self._channels.clear()
        for daemon in self._daemons.values():
            with contextlib.suppress(Exception):
                await daemon.close()
        self._daemons.clear()
        if self._sbx is not None:
            await self._backend.remove(self._sbx.sandbox_id)

    async def _renew(self, lease_s: float) -> None:
        timeout = self._backend.timeout_for(lease_s)
        await self._backend.set_timeout(self._live().sandbox_id, timeout)
        self._ends_at = time.monotonic() + timeout

    async def _keep_alive_for(self, seconds: float | None) -> None:
        """Extend the provider timeout when a command could outlive the sandbox."""
        need = (seconds or 0.0) + RENEW_MARGIN_S
        if self._ends_at - time.monotonic() < need:
            await self._renew(max(self.spec.lease_s, need))

    async def _lost_or(self, exc: BaseException, what: str) -> InfraError:
        """SandboxLost when the provider says the sandbox is gone, else an InfraError."""
        secret = self._backend.secret
        if isinstance(exc, InfraError):
            return exc
        mapped = map_runtime_error(exc, what=f"{what} in sandbox {self.id}", secret=secret)
        if isinstance(mapped, SandboxLost):
            return mapped
        try:
            running = await self._live().is_running(request_timeout=10)
        except Exception:
            running = False
        if not running:
            return SandboxLost(
                scrub(f"sandbox {self.id} ({self.remote_id}) is gone: {exc}", secret)
            )
        return mapped

    # -- commands -----------------------------------------------------------------
    async def _exec(self, req: ExecRequest) -> ExecResult:
        await self._keep_alive_for(req.timeout)
        decoder = FrameDecoder(req.max_output_bytes)
        argv = remote_argv(req, python=self._backend.config.python)
        watchdog = req.timeout + self._backend.config.exec_grace_s if req.timeout else None
        try:
            via = self._backend.config.exec_via
            if via == "execd":
                daemon = self._daemons.get(req.user)
                if daemon is None:
                    daemon = self._daemons[req.user] = ExecDaemon(
                        self._envd(), self._backend.config.python, req.user
                    )
                await asyncio.wait_for(daemon.run(req, decoder), watchdog)
                return decoder.result()
            if via == "envd":
                run = self._envd().run(argv, on_stdout=decoder.feed, user=req.user)
            else:
                run = self._run_commands(argv, decoder, req.user)
            outcome = await asyncio.wait_for(run, watchdog)
        except TimeoutError:
            raise InfraError(
                f"sandbox {self.id}: no status from the in-sandbox supervisor {watchdog:.0f} s after "
                "the command started; the sandbox is unresponsive"
            ) from None
        except Exception as exc:
            raise await self._lost_or(exc, "exec") from None
        if not decoder.finished:
            lost = await self._lost_or(
                InfraError(
                    f"supervisor ended without a status (exit {outcome.exit_code}): "
                    f"{outcome.stderr[-500:]!r} {decoder.diagnostic()!r}"
                ),
                "exec",
            )
            if not isinstance(lost, SandboxLost):
                lost = await self._lost_or(e2b.SandboxException(str(lost)), "exec")
            raise lost
        return decoder.result()

    async def _run_commands(
        self, argv: list[str], decoder: FrameDecoder, user: str | None
    ) -> Outcome:
        """The SDK's ``commands.run`` path (``bash -l -c``); the SDK raises on non-zero exits."""
        errs: list[str] = []
        try:
            res = await self._live().commands.run(
                shlex.join(argv),
                on_stdout=lambda s: decoder.feed(s.encode()),
                on_stderr=errs.append,
                user=user,
                timeout=0,
            )
            return Outcome(exit_code=res.exit_code, stderr="".join(errs))
        except e2b.CommandExitException as exc:
            return Outcome(exit_code=exc.exit_code, stderr="".join(errs))

    async def _open_shell(self, cwd: str, env: Mapping[str, str]) -> ShellChannel:
        try:
            chan = await EnvdPtyChannel.open(
                self._envd(), cwd, env, python=self._backend.config.python
            )
        except Exception as exc:
            raise await self._lost_or(exc, "open shell") from None
        self._channels.append(chan)
        return chan

    # -- files ----------------------------------------------------------------------
    async def _write_file(self, path: str, data: bytes, mode: int) -> None:
        try:
            await self._live().files.write(path, data)
            if mode != 0o644:
                out = await self._envd().run(["chmod", format(mode, "o"), path])
                if out.exit_code != 0:
                    raise InfraError(f"chmod {mode:o} {path} failed: {out.stderr.strip()}")
        except InfraError:
            raise
        except Exception as exc:
            raise await self._lost_or(exc, f"write {path}") from None

    async def _read_file(self, path: str, max_bytes: int) -> bytes:
        try:
            kind = await self._envd().run(["sh", "-c", _SIZE_OF_REGULAR, "patchgym-size", path])
        except Exception as exc:
            raise await self._lost_or(exc, f"read {path}") from None
        if kind.exit_code == _NOT_REGULAR:
            raise NotARegularFile(f"{path!r} in sandbox {self.id} is not a regular file; refused")
        size = int(kind.stdout.strip()) if kind.stdout.strip().isdigit() else 0
        if size > max_bytes:
            raise FileTooLarge(
                f"{path!r} in sandbox {self.id} is {size} bytes, over the {max_bytes}-byte "
                "read limit",
                size=size,
                limit=max_bytes,
            )
        try:
            data = bytes(await self._live().files.read(path, format="bytes"))
        except (e2b.NotFoundException, e2b.InvalidArgumentException) as exc:
            raise SandboxFileNotFound(f"no file {path!r} in sandbox {self.id}: {exc}") from None
        except Exception as exc:
            raise await self._lost_or(exc, f"read {path}") from None
        if len(data) > max_bytes:
            raise FileTooLarge(
                f"{path!r} in sandbox {self.id} grew over the {max_bytes}-byte read limit",
                limit=max_bytes,
            )
        return data

    async def _put_archive(self, dest_dir: str, data: bytes) -> None:
        tmp = f"/tmp/.patchgym-{uuid.uuid4().hex}.tar"
        try:
            await self._live().files.write(tmp, data)
            out = await self._envd().run(
                archive.extract_argv(self._backend.config.python, tmp, dest_dir)
            )
        except Exception as exc:
            raise await self._lost_or(exc, f"upload archive to {dest_dir}") from None
        if out.exit_code != 0:
            raise InfraError(
                f"extracting the archive into {dest_dir} failed: {out.stderr.strip()[-1000:]}"
            )

    async def _get_archive(self, path: str) -> bytes:
        tmp = f"/tmp/.patchgym-{uuid.uuid4().hex}.tar"
        try:
            out = await self._envd().run(archive.pack_argv(self._backend.config.python, path, tmp))
            if out.exit_code == archive.MISSING_EXIT:
                raise SandboxFileNotFound(f"no file or directory {path!r} in sandbox {self.id}")
            if out.exit_code != 0:
                raise InfraError(f"packing {path} failed: {out.stderr.strip()[-1000:]}")
            data = bytes(await self._live().files.read(tmp, format="bytes"))
            await self._envd().run(["rm", "-f", tmp])
            return data
        except (InfraError, SandboxFileNotFound):
            raise
        except Exception as exc:
            raise await self._lost_or(exc, f"download archive of {path}") from None
