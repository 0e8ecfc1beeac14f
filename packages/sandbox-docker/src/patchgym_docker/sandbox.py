"""``DockerSandbox``: one container per sandbox, commands through ``docker exec``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import docker.errors
from docker.types import Ulimit

from patchgym_docker import archive, supervised
from patchgym_docker.engine import explain, status_of
from patchgym_docker.exec_client import ExecServerConnection, server_source
from patchgym_docker.hijack import Hijacked
from patchgym_docker.shell import DockerShellChannel
from patchgym_sandbox import labels as L
from patchgym_sandbox import remote, seccomp
from patchgym_sandbox.errors import (
    ConfigError,
    InfraError,
    SandboxFileError,
    SandboxFileNotFound,
    SandboxLost,
)
from patchgym_sandbox.remote import FrameDecoder
from patchgym_sandbox.result import ExecResult
from patchgym_sandbox.sandbox import ExecRequest, Sandbox
from patchgym_sandbox.server_client import ServerGone, ServerSlot
from patchgym_sandbox.session import SHELL_ARGV, SHELL_ENV, ShellChannel
from patchgym_sandbox.spec import SandboxSpec

if TYPE_CHECKING:
    from docker import APIClient

    from patchgym_docker.backend import DockerBackend

SESSION_VAR = "PATCHGYM_SESSION"
BACKEND_LABEL = "patchgym.backend"
"""Set to ``docker`` so reaping never touches other tools' containers that copy our labels
(a kubelet on the same engine copies pod labels onto its pause containers)."""
MAX_SYMLINK_HOPS = 8
_PATH_REFUSALS = ("not a directory", "could not find the file", "permission denied", "file exists")


def _sandbox_made(exc: docker.errors.APIError) -> bool:
    """Whether the engine refused an archive because of the container's own files."""
    text = explain(exc).lower()
    return "no such container" not in text and any(s in text for s in _PATH_REFUSALS)


MAX_SERVER_STARTS = 3
"""Exec server (re)starts per sandbox before falling back to one ``docker exec`` per command."""
SERVER_READY_TIMEOUT_S = 30.0
LOST_CHECKS = 25
LOST_CHECK_INTERVAL_S = 0.2


class DockerSandbox(Sandbox):
    backend_name = "docker"

    def __init__(self, backend: DockerBackend, spec: Any) -> None:
        super().__init__(spec)
        self._backend = backend
        self._engine = backend.engine
        self._config = backend.config
        self._cid: str | None = None
        self._channels: list[DockerShellChannel] = []
        self._background: set[asyncio.Task[None]] = set()
        self._server_slot: ServerSlot[ExecServerConnection] = ServerSlot(MAX_SERVER_STARTS)
        self.fork_image: str | None = None
        """Set on a fork's children before start: the committed image they run
        (:mod:`patchgym_docker.fork`), removed by the last of them to close."""

    @property
    def container_id(self) -> str:
        if self._cid is None:
            raise InfraError(f"sandbox {self.id} has no container yet (not started)")
        return self._cid

    # -- lifecycle ---------------------------------------------------------------
    async def _start(self) -> None:
        if not self.spec.image:
            raise ConfigError(
                "the docker backend needs `image` in the sandbox spec (e.g. image='local/bookworm-py')"
            )
        self._cid = await self._engine.call(
            f"create container for image {self.spec.image!r}", self._create, idempotent=True
        )
        await self._engine.call(
            f"start container {self.id}",
            lambda api: api.start(self.container_id),
            idempotent=True,
            lost_if_missing=self.id,
        )
        if self._config.exec_mode == "server":
            # Boot the exec server while the caller does other set-up (file uploads, ...);
            # the first command waits for it, and a failed boot is retried there.
            self._spawn(self._boot_server())

    def labels(self) -> dict[str, str]:
        """Backend labels, then the spec's (user labels, run/rollout ids, lease expiry).

        A container's labels cannot change, so its lease cannot be renewed while it is in
        use: a spec with the short renewable default lease is stamped once with
        ``fixed_lease_s`` instead, long enough for an episode, so ``reap --expired`` never
        removes a live one (``reap --run`` is immediate); a lease the caller chose is kept.
        """
        spec = self.spec
        if spec.lease_s == L.DEFAULT_LEASE_S:
            lease = max(spec.lease_s, self._config.fixed_lease_s)
            spec = spec.model_copy(update={"lease_s": lease})
        return {**self._config.labels, BACKEND_LABEL: "docker", **spec.all_labels(self.id)}

    def _host_config(self, api: APIClient) -> dict[str, Any]:
        cfg, res = self._config, self.spec.resources
        kwargs: dict[str, Any] = {
            "network_mode": cfg.network_enabled_mode if self.spec.network else cfg.network_mode,
            "init": cfg.init,
        }
        memory_mb = res.memory_mb if res.memory_mb is not None else cfg.default_memory_mb
        if memory_mb is not None:
            kwargs["mem_limit"] = f"{memory_mb}m"
            kwargs["memswap_limit"] = f"{memory_mb}m"
        if res.cpus is not None:
            kwargs["nano_cpus"] = int(res.cpus * 1e9)
        pids = res.pids if res.pids is not None else cfg.default_pids
        if pids is not None:
            kwargs["pids_limit"] = pids
        if res.cpu_time_s is not None:
            kwargs["ulimits"] = [Ulimit(name="cpu", soft=res.cpu_time_s, hard=res.cpu_time_s)]
        if cfg.runtime is not None:
            kwargs["runtime"] = cfg.runtime
        if cfg.cap_drop:
            kwargs["cap_drop"] = cfg.cap_drop
        if cfg.cap_add:
            kwargs["cap_add"] = cfg.cap_add
        opts = [f"seccomp={seccomp.docker_profile_json()}"]
        kwargs["security_opt"] = ["no-new-privileges", *opts] if cfg.no_new_privileges else opts
        if cfg.read_only_rootfs:
            kwargs["read_only"] = True
        if cfg.shm_size_mb is not None:
            kwargs["shm_size"] = f"{cfg.shm_size_mb}m"
        kwargs.update(cfg.extra_host_config)
        host = cast(dict[str, Any], api.create_host_config(**kwargs))
        # the OCI defaults, stated here rather than left to the engine's version, and PID
        # 1's OOM score read-only (no root inside aims the OOM killer at the init)
        host.setdefault("MaskedPaths", list(seccomp.MASKED_PATHS))
        host.setdefault("ReadonlyPaths", [*seccomp.READONLY_PATHS, *seccomp.INIT_OOM_PATHS])
        host.setdefault("CgroupnsMode", "private")
        return host

    def _create(self, api: APIClient) -> str:
        """Create the container, named after the sandbox id so a retried create is harmless."""
        try:
            created = api.create_container(
                self.fork_image or self.spec.image,
                command=list(self._config.keepalive_cmd),
                name=self.id,
                labels=self.labels(),
                host_config=self._host_config(api),
                working_dir=self.spec.workdir,
                environment=dict(self.spec.env),
                user=self.spec.user or "",
                detach=True,
            )
        except docker.errors.APIError as exc:
            if status_of(exc) == 409 and self.id in explain(exc):  # an earlier try got through
                return str(api.inspect_container(self.id)["Id"])
            raise
        return str(created["Id"])

    async def _close(self) -> None:
        for task in list(self._background):
            task.cancel()
        server = self._server_slot.take()
        if server is not None:
            server.close()
        channels, self._channels = self._channels, []
        for chan in channels:
            with contextlib.suppress(Exception):
                await chan.close()
        if self._cid is not None:
            await self._backend.remove_container(self._cid)
        if self.fork_image is not None:
            from patchgym_docker.fork import remove_image

            await remove_image(self._backend, self.fork_image)

    async def _fork(self, spec: SandboxSpec, n: int) -> list[Sandbox]:
        from patchgym_docker.fork import fork_container

        return await fork_container(self._backend, self, spec, n)

    # -- commands ----------------------------------------------------------------
    async def _exec(self, req: ExecRequest) -> ExecResult:
        if self._config.exec_mode == "server" and req.user in (None, self.spec.user):
            server = await self._exec_server()
            if server is not None:
                try:
                    return await self._exec_on_server(server, req)
                except ServerGone:  # the request was never sent: the fallback is safe
                    pass
        return await self._exec_per_call(req)

    async def _boot_server(self) -> None:
        with contextlib.suppress(Exception):
            await self._exec_server()

    async def _exec_server(self) -> ExecServerConnection | None:
        """The sandbox's exec server, (re)started on demand; None means use ``docker exec``."""
        return await self._server_slot.get(self._start_server)

    async def _start_server(self) -> ExecServerConnection | None:
        """A new exec server; None when it cannot run in this container."""
        argv = [self._config.python, "-I", "-S", "-c", server_source(), supervised.source()]
        exec_id = await self._exec_create(argv, user=self.spec.user, stdin=True)
        hijacked = await self._engine.call(
            f"start the exec server in {self.id}",
            lambda api: api.exec_start(exec_id, socket=True),
            idempotent=False,
            lost_if_missing=self.id,
        )
        conn = ExecServerConnection(hijacked, self._engine.run)
        conn.exec_id = exec_id
        if not await self._engine.run(lambda: conn.wait_ready(SERVER_READY_TIMEOUT_S)):
            conn.close()
            await self._raise_if_lost("the exec server start")
            return None
        return conn

    async def _exec_on_server(self, server: ExecServerConnection, req: ExecRequest) -> ExecResult:
        tagged, token = supervised.tag(req)
        tagged, files = supervised.spill(tagged, argv_only=True)
        if files:
            await self._put(supervised.SPILL_DIR, archive.files_tar(files))
        decoder = FrameDecoder(req.max_output_bytes)
        done = await server.run(tagged, decoder)
        limit = req.timeout + self._config.exec_grace_s if req.timeout is not None else None
        try:
            await asyncio.wait_for(asyncio.shield(done), limit)
        except TimeoutError:
            self._spawn(self._kill_token(supervised.EXEC_ID_VAR, token))
            await self._raise_if_lost(f"exec of {req.cmd[:80]!r}")
            raise InfraError(
                f"sandbox {self.id}: no exit status {self._config.exec_grace_s:.0f} s past the "
                f"{req.timeout} s deadline (is the container frozen?)"
            ) from None
        except asyncio.CancelledError:
            self._spawn(self._kill_token(supervised.EXEC_ID_VAR, token))
            raise
        except ServerGone as exc:
            await self._raise_if_lost(f"exec of {req.cmd[:80]!r}")
            if await self._server_exited(server):
                # The container runs and the server process exited: something inside killed
                # it (the command, `kill -9 $PPID`). The task's doing, not infra.
                return decoder.runner_killed()
            raise InfraError(
                f"sandbox {self.id}: the stream to the exec server broke during "
                f"{req.cmd[:80]!r}; it restarts on the next exec. {exc}"
            ) from None
        return decoder.result()

    async def _server_exited(self, server: ExecServerConnection) -> bool:
        """Whether the engine saw the exec server's process end (vs. only its stream)."""
        exec_id = server.exec_id
        if exec_id is None:
            return False
        for _ in range(LOST_CHECKS):
            info = await self._engine.call(
                f"inspect the exec server of {self.id}",
                lambda api: api.exec_inspect(exec_id),
                idempotent=True,
                lost_if_missing=self.id,
            )
            if not info.get("Running"):
                return True
            await asyncio.sleep(LOST_CHECK_INTERVAL_S)
        return False

    async def _exec_per_call(self, req: ExecRequest) -> ExecResult:
        """One ``docker exec`` running the supervisor for this command alone."""
        tagged, token = supervised.tag(req)
        small, files = supervised.spill(tagged)
        if files:
            await self._put(supervised.SPILL_DIR, archive.files_tar(files))
        argv = supervised.supervisor_argv(self._config.python, small)
        exec_id = await self._exec_create(argv, user=req.user)
        decoder = FrameDecoder(req.max_output_bytes)
        call = supervised.ExecCall()
        api = self._engine.api
        future = asyncio.ensure_future(
            self._engine.run(lambda: supervised.run_stream(api, exec_id, decoder, call))
        )
        limit = req.timeout + self._config.exec_grace_s if req.timeout is not None else None
        overdue = False
        try:
            error = await asyncio.wait_for(asyncio.shield(future), limit)
        except TimeoutError:
            overdue = True
            call.abort()
            error = await future
        except asyncio.CancelledError:
            call.abort()
            self._spawn(self._kill_token(supervised.EXEC_ID_VAR, token))
            raise
        if decoder.finished:
            return decoder.result()
        if overdue:
            self._spawn(self._kill_token(supervised.EXEC_ID_VAR, token))
        await self._raise_if_lost(f"exec of {req.cmd[:80]!r}")
        if overdue:
            raise InfraError(
                f"sandbox {self.id}: no exit status {self._config.exec_grace_s:.0f} s past the "
                f"{req.timeout} s deadline (is the container frozen?)"
            )
        why = f"transport error {error!r}" if error is not None else "the stream ended early"
        try:
            return decoder.result()
        except InfraError as exc:
            raise InfraError(f"sandbox {self.id}: {why}; {exc}") from exc

    async def _exec_create(self, argv: list[str], *, user: str | None, **kwargs: Any) -> str:
        cid = self.container_id
        created = await self._engine.call(
            f"exec in sandbox {self.id}",
            lambda api: api.exec_create(cid, argv, user=user or "", **kwargs),
            idempotent=True,  # creating an exec instance runs nothing
            lost_if_missing=self.id,
        )
        return str(created["Id"])

    async def _raise_if_lost(self, what: str) -> None:
        """Raise SandboxLost when the container is gone or stopped; otherwise return."""
        cid = self.container_id

        def state(api: APIClient) -> dict[str, Any] | None:
            try:
                return cast(dict[str, Any], api.inspect_container(cid)["State"])
            except docker.errors.NotFound:
                return None

        # The exec stream can end a moment before the engine records the container's death.
        st: dict[str, Any] | None = None
        for _ in range(LOST_CHECKS):
            st = await self._engine.call(f"inspect sandbox {self.id}", state, idempotent=True)
            if st is None or not st.get("Running") or st.get("Paused"):
                break
            await asyncio.sleep(LOST_CHECK_INTERVAL_S)
        if st is None:
            raise SandboxLost(f"sandbox {self.id} was removed during {what}")
        if not st.get("Running") or st.get("Paused"):
            detail = f"status {st.get('Status')}, exit code {st.get('ExitCode')}"
            if st.get("OOMKilled"):
                detail += ", OOM-killed"
            raise SandboxLost(f"sandbox {self.id} stopped during {what} ({detail})")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _kill_token(self, var: str, token: str, *, foreground: bool = False) -> None:
        """Kill every process carrying ``var=token`` inside the container (best effort);
        ``foreground``: only the foreground job of the interactive shell carrying it."""
        if self._cid is None or self.closed:
            return
        server = self._server_slot.current
        if server is not None and await server.kill(var, token, foreground=foreground):
            return
        cid = self._cid
        python = self._config.python
        if foreground:
            argv = remote.kill_foreground_argv(python, supervised.source(), var, token)
        else:
            argv = supervised.kill_argv(python, var, token)

        def kill(api: APIClient) -> None:
            exec_id = api.exec_create(cid, argv)["Id"]
            Hijacked(api.exec_start(exec_id, socket=True)).output()  # to its end, read-ahead too

        with contextlib.suppress(Exception):
            await self._engine.call(f"kill {var} in {self.id}", kill, idempotent=True)

    # -- sessions ------------------------------------------------------------------
    async def _open_shell(self, cwd: str, env: Mapping[str, str]) -> ShellChannel:
        token = uuid.uuid4().hex
        environment = {**env, **SHELL_ENV, SESSION_VAR: token}
        exec_id = await self._exec_create(
            list(SHELL_ARGV),
            user=self.spec.user,
            stdin=True,
            tty=True,
            environment=environment,
            workdir=cwd,
        )
        hijacked = await self._engine.call(
            f"start shell in {self.id}",
            lambda api: api.exec_start(exec_id, tty=True, socket=True),
            idempotent=False,
            lost_if_missing=self.id,
        )

        async def on_close() -> None:
            await self._kill_token(SESSION_VAR, token)

        async def kill_foreground() -> None:
            await self._kill_token(SESSION_VAR, token, foreground=True)

        chan = DockerShellChannel(
            hijacked, asyncio.get_running_loop(), self._engine.run, on_close, kill_foreground
        )
        self._channels.append(chan)
        return chan

    # -- files ---------------------------------------------------------------------
    async def _put(self, dest_dir: str, data: bytes | Callable[[], Iterator[bytes]]) -> None:
        """``put_archive`` into ``dest_dir``, creating it (``mkdir -p``) when missing.

        ``data`` is the tar, or a factory of a fresh chunk stream per attempt (retries and
        the mkdir retry each re-read the source).
        """
        cid = self.container_id

        def body() -> bytes | Iterator[bytes]:
            return data if isinstance(data, bytes) else data()

        def put(api: APIClient) -> None:
            try:
                try:
                    ok = api.put_archive(cid, dest_dir, body())
                except docker.errors.NotFound as exc:
                    if "No such container" in explain(exc):
                        raise
                    self._mkdir_blocking(api, dest_dir)
                    ok = api.put_archive(cid, dest_dir, body())
            except docker.errors.APIError as exc:
                if not _sandbox_made(exc):
                    raise
                raise SandboxFileError(
                    f"cannot write into {dest_dir!r} in sandbox {self.id}: {explain(exc)}"
                ) from None
            if not ok:
                raise InfraError(
                    f"sandbox {self.id}: the engine refused the archive for {dest_dir}"
                )

        await self._engine.call(
            f"put_archive {dest_dir!r} in {self.id}", put, idempotent=True, lost_if_missing=self.id
        )

    def _mkdir_blocking(self, api: APIClient, path: str) -> None:
        exec_id = api.exec_create(
            self.container_id, ["mkdir", "-p", "--", path], user=self.spec.user or ""
        )["Id"]
        out = Hijacked(api.exec_start(exec_id, socket=True)).output()
        code = api.exec_inspect(exec_id).get("ExitCode")
        if code != 0:  # a file or a dangling link where the directory goes: the task's doing
            raise SandboxFileError(
                f"cannot create the directory {path!r} in sandbox {self.id}: "
                f"{out.decode(errors='replace').strip()}"
            )

    async def upload(self, source: str | os.PathLike[str], dest: str) -> None:
        """Copy a local file or directory to ``dest`` as one tar stream, never all in memory."""
        await self._ensure()
        src = Path(source)
        if not src.exists():
            raise FileNotFoundError(f"upload source {src} does not exist")
        parent, name = archive.split(self.resolve(dest))
        await self._put(parent, lambda: archive.tar_stream(src, name or "."))

    async def download(self, source: str, dest: str | os.PathLike[str]) -> None:
        """Copy a sandbox file or directory to the local path ``dest``, extracting as it streams."""
        await self._ensure()
        path = self.resolve(source)
        await self._engine.call(
            f"download {path!r} from {self.id}",
            lambda api: archive.extract_as(self._get_blocking(api, path), Path(dest)),
            idempotent=True,
            lost_if_missing=self.id,
        )

    async def _write_file(self, path: str, data: bytes, mode: int) -> None:
        parent, name = archive.split(path)
        await self._put(parent, archive.files_tar({name: (data, mode)}))

    async def _put_archive(self, dest_dir: str, data: bytes) -> None:
        await self._put(dest_dir, data)

    def _get_blocking(self, api: APIClient, path: str) -> Any:
        try:
            stream, _stat = api.get_archive(self.container_id, path, chunk_size=1 << 20)
        except docker.errors.NotFound as exc:
            if "No such container" in explain(exc):
                raise
            raise SandboxFileNotFound(
                f"no file or directory {path!r} in sandbox {self.id}"
            ) from exc
        return stream

    async def _read_file(self, path: str, max_bytes: int) -> bytes:
        def read(api: APIClient) -> bytes:
            target = path
            for _ in range(MAX_SYMLINK_HOPS):
                stream = self._get_blocking(api, target)
                try:
                    return archive.single_file(stream, target, max_bytes)
                except archive.Symlink as link:
                    target = link.target
                finally:
                    close = getattr(stream, "close", None)
                    if close is not None:  # drop an unread (too large) body now
                        close()
            raise SandboxFileNotFound(
                f"too many symbolic links resolving {path!r} in sandbox {self.id}"
            )

        return await self._engine.call(
            f"read {path!r} in {self.id}", read, idempotent=True, lost_if_missing=self.id
        )

    async def _get_archive(self, path: str) -> bytes:
        def get(api: APIClient) -> bytes:
            return b"".join(self._get_blocking(api, path))

        return await self._engine.call(
            f"get_archive {path!r} in {self.id}", get, idempotent=True, lost_if_missing=self.id
        )
