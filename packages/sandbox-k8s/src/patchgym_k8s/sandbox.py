"""``K8sSandbox``: one pod, commands and files through the exec API."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

from patchgym_k8s import commands, files, manifest
from patchgym_k8s.create import create_pod
from patchgym_k8s.deletion import delete_pod
from patchgym_k8s.errors import ExecStalled, SandboxFileError
from patchgym_k8s.execserver import ExecServer, server_argv
from patchgym_k8s.execstream import ExecStatus, ExecStream, StreamOpenError
from patchgym_k8s.metadata import labels_of, lease_patch
from patchgym_k8s.readiness import wait_running
from patchgym_sandbox import labels as L
from patchgym_sandbox.errors import (
    ConfigError,
    FileTooLarge,
    InfraError,
    NotARegularFile,
    SandboxFileNotFound,
    SandboxLost,
)
from patchgym_sandbox.output import CappedBuffer
from patchgym_sandbox.remote import SUPERVISOR_PATH, FrameDecoder, remote_argv
from patchgym_sandbox.result import ExecResult
from patchgym_sandbox.retry import Retry
from patchgym_sandbox.sandbox import ExecRequest, Sandbox
from patchgym_sandbox.server_client import ServerGone, ServerSlot
from patchgym_sandbox.session import ShellChannel
from patchgym_sandbox.spec import SandboxSpec

if TYPE_CHECKING:
    from patchgym_k8s.backend import K8sBackend

ARGV_LIMIT = 60_000
"""Requests bigger than this (large stdin / env) go to the supervisor on stdin, not argv."""
STDIN_LOADER = (
    "import sys,runpy;p=sys.argv[1];a=sys.stdin.buffer.read(int(sys.argv[2])).decode();"
    "sys.argv=[p,a];runpy.run_path(p,run_name='__main__')"
)
WAIT_FOR_SUPERVISOR = (
    'i=0; while [ ! -f "$1" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; shift; exec "$@"'
)
RETRYABLE_OPEN = frozenset({0, 429, 500, 502, 503, 504})
MAX_SERVER_STARTS = 3
"""Exec server (re)starts per sandbox before falling back to one exec stream per command."""
SERVER_READY_TIMEOUT_S = 30.0


class _StreamBroke(Exception):
    """A file command's stream ended without an exit status (retried: the op is idempotent)."""


def _open_refused(exc: BaseException) -> bool:
    """The exec websocket was refused with a status worth another try (nothing ran)."""
    return isinstance(exc, StreamOpenError) and exc.status in RETRYABLE_OPEN


class K8sSandbox(Sandbox):
    backend_name = "k8s"

    def __init__(self, backend: K8sBackend, spec: SandboxSpec) -> None:
        super().__init__(spec)
        self._backend = backend
        self._cfg = backend.config
        self._supervisor_seen = False
        self._server_slot: ServerSlot[ExecServer] = ServerSlot(MAX_SERVER_STARTS)
        self._channels: list[ShellChannel] = []

    @property
    def pod_name(self) -> str:
        return self.id

    # -- lifecycle ---------------------------------------------------------------
    async def _start(self) -> None:
        body = manifest.pod_manifest(self._cfg, self.spec, self.pod_name, uuid.uuid4().hex)
        api = self._backend.api
        created = await self._backend.call(create_pod, api, body, self._cfg.create_retry)
        await self._backend.call(
            wait_running,
            api,
            created,
            self._cfg.container_name,
            self.spec.image or "",
            self._cfg.create_timeout_s,
        )

    async def _close(self) -> None:
        server = self._server_slot.take()
        if server is not None:
            await self._backend.call(server.close)
        for chan in self._channels:
            try:
                await chan.close()
            except Exception:
                pass
        self._channels.clear()
        await self._backend.call(
            delete_pod,
            self._backend.api,
            self.pod_name,
            grace_s=self._cfg.termination_grace_s,
            timeout_s=self._cfg.delete_timeout_s,
            wait=self._cfg.wait_for_delete,
        )

    async def _renew(self, lease_s: float) -> None:
        api = self._backend.api
        pod = await self._backend.call(api.read_pod, self.pod_name)
        if pod is None:
            raise SandboxLost(f"pod {self.pod_name} is gone; cannot renew its lease")
        patch = lease_patch(labels_of(pod), L.expires_at(lease_s))
        await self._backend.call(api.patch_pod, self.pod_name, patch)

    # -- liveness ------------------------------------------------------------------
    def check_alive(self) -> None:
        """Raise SandboxLost unless the pod exists, is not terminating and its container runs."""
        pod = self._backend.api.read_pod(self.pod_name)
        if pod is None:
            raise SandboxLost(f"pod {self.pod_name} was deleted (sandbox {self.id})")
        if pod["metadata"].get("deletionTimestamp"):
            raise SandboxLost(f"pod {self.pod_name} is being deleted (sandbox {self.id})")
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            if cs.get("name") == self._cfg.container_name and "running" not in (
                cs.get("state") or {}
            ):
                raise SandboxLost(
                    f"the container of pod {self.pod_name} is not running: {cs.get('state')}"
                )

    def _lost_or(self, error: InfraError) -> InfraError:
        try:
            self.check_alive()
        except SandboxLost as lost:
            return lost
        except InfraError:
            pass
        return error

    # -- commands ----------------------------------------------------------------
    def _supervisor_argv(self, req: ExecRequest) -> tuple[list[str], bytes | None]:
        argv = remote_argv(req, python=self._cfg.python)
        stdin: bytes | None = None
        if len(argv[-1]) > ARGV_LIMIT:
            stdin = argv[-1].encode()
            argv = [
                self._cfg.python,
                "-I",
                "-S",
                "-c",
                STDIN_LOADER,
                SUPERVISOR_PATH,
                str(len(stdin)),
            ]
        if not self._supervisor_seen:
            argv = ["sh", "-c", WAIT_FOR_SUPERVISOR, "patchgym-wait", SUPERVISOR_PATH, *argv]
        return argv, stdin

    async def _exec(self, req: ExecRequest) -> ExecResult:
        if req.user is not None and req.user != self.spec.user:
            raise ConfigError(
                f"the k8s exec API runs as the pod's user; per-command user {req.user!r} is not "
                "supported: set SandboxSpec.user (a numeric uid) for the whole sandbox"
            )
        if self._cfg.exec_mode == "server":
            server = await self._exec_server()
            if server is not None:
                try:
                    return await self._exec_on_server(server, req)
                except ServerGone:  # the request was never queued: the fallback is safe
                    pass
        return await self._exec_per_call(req)

    async def _exec_server(self) -> ExecServer | None:
        """The pod's exec server, (re)started on demand; None means one stream per command."""
        return await self._server_slot.get(self._start_server)

    async def _start_server(self) -> ExecServer | None:
        """A new exec server; None when it cannot run in this pod."""
        try:
            ws = await self._backend.call(
                ExecStream,
                self._backend.api,
                self.pod_name,
                self._cfg.container_name,
                server_argv(self._cfg.python),
                stdin=True,
                tty=False,
            )
        except StreamOpenError as exc:
            raise await self._lost_or_async(
                InfraError(f"cannot start the exec server in pod {self.pod_name}: {exc}")
            ) from exc
        server = ExecServer(ws, self.id)
        if not await self._backend.call(server.wait_ready, SERVER_READY_TIMEOUT_S):
            diag = server.diagnostic()
            await self._backend.call(server.close)
            await self._lost_or_raise(f"the exec server start ({diag[-300:]!r})")
            return None
        return server

    async def _lost_or_raise(self, what: str) -> None:
        error = await self._lost_or_async(InfraError(what))
        if isinstance(error, SandboxLost):
            raise error

    async def _exec_on_server(self, server: ExecServer, req: ExecRequest) -> ExecResult:
        decoder = FrameDecoder(req.max_output_bytes)
        rid, done = server.run(req, decoder)
        deadline = None
        if req.timeout is not None:
            deadline = time.monotonic() + req.timeout + self._cfg.exec_grace_s
        try:
            while True:
                wait = self._cfg.liveness_check_s
                if deadline is not None:
                    wait = min(wait, deadline - time.monotonic())
                try:
                    await asyncio.wait_for(asyncio.shield(done), max(0.0, wait))
                    break
                except TimeoutError:
                    await self._backend.call(self.check_alive)  # SandboxLost when the pod went
                    if deadline is not None and time.monotonic() >= deadline:
                        server.kill(rid)
                        raise ExecStalled(
                            f"exec in pod {self.pod_name} gave no exit status "
                            f"{self._cfg.exec_grace_s:.0f}s past its deadline; the in-pod server "
                            "was asked to kill it"
                        ) from None
        except asyncio.CancelledError:
            server.kill(rid)
            raise
        except ServerGone as exc:
            await self._lost_or_raise(f"exec of {req.cmd[:80]!r}")
            if server.exit_code is not None:
                # The pod runs and the kubelet saw the server exit: something inside killed
                # it (the command, `kill -9 $PPID`). The task's doing, not infra.
                return decoder.runner_killed()
            raise InfraError(
                f"sandbox {self.id}: the exec stream to the pod's exec server broke during "
                f"{req.cmd[:80]!r}; it restarts on the next exec. {exc}"
            ) from None
        return decoder.result()

    async def _exec_per_call(self, req: ExecRequest) -> ExecResult:
        """One exec stream running the supervisor for this command alone."""
        argv, stdin = self._supervisor_argv(req)
        decoder = FrameDecoder(req.max_output_bytes)
        stderr = CappedBuffer(8192)

        def sink(channel: int, data: bytes) -> None:
            if channel == 1:
                decoder.feed(data)
            else:
                stderr.write(data)

        deadline = None
        if req.timeout is not None:
            deadline = time.monotonic() + req.timeout + self._cfg.exec_grace_s

        async def run_once() -> ExecStatus:
            try:
                return await self._backend.call(
                    commands.run,
                    self._backend.api,
                    self.pod_name,
                    self._cfg.container_name,
                    argv,
                    sink=sink,
                    stdin=stdin,
                    client_deadline=deadline,
                    liveness_s=self._cfg.liveness_check_s,
                    check_alive=self.check_alive,
                )
            except StreamOpenError as exc:
                # The websocket upgrade failed, so the command never started: retrying is safe.
                # (Once the stream is open, nothing is retried: the command may have run.)
                lost = await self._lost_or_async(InfraError(str(exc)))
                if isinstance(lost, SandboxLost):
                    raise lost from exc
                raise

        retry = Retry(self._cfg.file_retry, when=_open_refused, what=f"exec in pod {self.pod_name}")
        try:
            status = await retry.acall(run_once)
        except StreamOpenError as exc:
            raise InfraError(f"exec in pod {self.pod_name} could not start: {exc}") from exc
        if decoder.finished:
            self._supervisor_seen = True
            return decoder.result()
        err = InfraError(
            f"exec in pod {self.pod_name} ended without a result (kubelet: {status.message or status.code}; "
            f"stderr: {stderr.text()[-500:]!r}; stdout: {decoder.diagnostic()!r}); is {self._cfg.python} in the image?"
        )
        raise await self._lost_or_async(err)

    async def _lost_or_async(self, error: InfraError) -> InfraError:
        return await self._backend.call(self._lost_or, error)

    async def _open_shell(self, cwd: str, env: Mapping[str, str]) -> ShellChannel:
        from patchgym_k8s.shell import K8sShellChannel

        chan = await K8sShellChannel.open(self, cwd, env)
        self._channels.append(chan)
        return chan

    # -- files ---------------------------------------------------------------------
    def _file_op(self, argv: list[str], stdin: bytes | None, what: str) -> tuple[int, bytes, str]:
        """Run an idempotent file command, retrying when its stream failed (blocking)."""

        def once() -> tuple[int, bytes, str]:
            out = bytearray()
            err = CappedBuffer(8192)

            def sink(channel: int, data: bytes) -> None:
                if channel == 1:
                    out.extend(data)
                else:
                    err.write(data)

            try:
                status = commands.run(
                    self._backend.api,
                    self.pod_name,
                    self._cfg.container_name,
                    argv,
                    sink=sink,
                    stdin=stdin,
                    liveness_s=self._cfg.liveness_check_s,
                    check_alive=self.check_alive,
                )
            except StreamOpenError:
                self.check_alive()
                raise
            if status.code is None:
                self.check_alive()
                raise _StreamBroke(status.message)
            return status.code, bytes(out), err.text()

        retryable = lambda e: _open_refused(e) or isinstance(e, _StreamBroke)  # noqa: E731
        try:
            return Retry(self._cfg.file_retry, when=retryable, what=what).call(once)
        except StreamOpenError as exc:
            raise InfraError(
                f"{what} in pod {self.pod_name}: cannot open the exec stream: {exc}"
            ) from exc
        except _StreamBroke as exc:
            raise InfraError(f"{what} in pod {self.pod_name}: the stream broke ({exc})") from exc

    async def _write_file(self, path: str, data: bytes, mode: int) -> None:
        parent, tar = files.single_file_tar(path, data, mode)
        await self._put_archive(parent, tar)

    async def _read_file(self, path: str, max_bytes: int) -> bytes:
        out = await self._fetch(files.cat_argv(path, max_bytes), path, "read", "file")
        if len(out) > max_bytes:
            raise FileTooLarge(
                f"{path!r} in sandbox {self.id} is over the {max_bytes}-byte read limit",
                limit=max_bytes,
            )
        return out

    async def _put_archive(self, dest_dir: str, data: bytes) -> None:
        code, _, err = await self._backend.call(
            self._file_op, files.put_argv(dest_dir, len(data)), data, f"extract into {dest_dir}"
        )
        if code != 0:
            raise SandboxFileError(
                f"cannot extract into {dest_dir!r} in sandbox {self.id}: {err.strip() or f'exit {code}'}"
            )

    async def _get_archive(self, path: str) -> bytes:
        return await self._fetch(files.get_argv(path), path, "archive", "file or directory")

    async def _fetch(self, argv: list[str], path: str, verb: str, what: str) -> bytes:
        """Run an idempotent read-only file command; missing paths and failures typed."""
        code, out, err = await self._backend.call(self._file_op, argv, None, f"{verb} {path}")
        if code in files.NOT_FOUND_CODES:
            raise SandboxFileNotFound(f"no {what} {path!r} in sandbox {self.id}")
        if code == files.NOT_REGULAR_CODE:
            raise NotARegularFile(f"{path!r} in sandbox {self.id} is not a regular file; refused")
        if code != 0:
            raise SandboxFileError(
                f"cannot {verb} {path!r} in sandbox {self.id}: {err.strip() or f'exit {code}'}"
            )
        return out
