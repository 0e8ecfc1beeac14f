"""The async ``Sandbox``: one per rollout, lazily started, always closed.

Backends subclass :class:`Sandbox` and implement the underscore primitives; this class
owns the contract every caller relies on: lazy start (the spec, image included, may be
changed until first use), closed-state checks, path checks, and tar-based directory
transfer on top of the backend's archive primitives.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import shlex
import tarfile
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self

from patchgym_sandbox import labels as L
from patchgym_sandbox import paths, tarsafe
from patchgym_sandbox.admission import admitted
from patchgym_sandbox.derived import DERIVE_TIMEOUT_S
from patchgym_sandbox.errors import ConfigError, DeriveFailed, SandboxClosed
from patchgym_sandbox.result import ExecResult
from patchgym_sandbox.spec import SandboxSpec

log = logging.getLogger("patchgym.sandbox")

if TYPE_CHECKING:
    from patchgym_sandbox.backend import SandboxBackend
    from patchgym_sandbox.session import ShellChannel, ShellSession


@dataclass(frozen=True, slots=True)
class ExecRequest:
    """A fully resolved ``exec`` call handed to a backend."""

    cmd: str
    timeout: float | None
    idle_timeout: float | None
    cwd: str
    env: Mapping[str, str]
    stdin: bytes | None
    user: str | None
    max_output_bytes: int


MAX_READ_BYTES = 64 * 1024 * 1024
"""The default byte cap of :meth:`Sandbox.read_file` (a file is data the policy wrote)."""


def new_sandbox_id() -> str:
    return "pg-" + uuid.uuid4().hex[:16]


class Sandbox(ABC):
    """One isolated place to run a rollout. Use ``async with`` or call ``close()``."""

    backend_name: str = "abstract"
    origin: SandboxBackend | None = None
    """The backend whose ``sandbox()`` made this one (what a generic ``fork`` starts from)."""

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec
        self.id = new_sandbox_id()
        self._state = "new"
        self._start_lock: asyncio.Lock | None = None
        self._renewed_at = 0.0
        self.admission_wait_s = 0.0
        """Seconds ``start()`` waited for its backend's admission control."""
        self.start_window: tuple[float, float] | None = None
        """``time.monotonic()`` when provisioning began (admitted) and when it ended."""

    # -- lifecycle ---------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self._state == "started"

    @property
    def closed(self) -> bool:
        return self._state == "closed"

    @property
    def workdir(self) -> str:
        """Absolute path of the working directory as commands inside the sandbox see it."""
        return self.spec.workdir

    def file_roots(self) -> Sequence[str]:
        """Absolute sandbox paths the file API may touch (the whole sandbox by default)."""
        return ("/",)

    async def start(self) -> Self:
        """Provision the sandbox. Idempotent; called implicitly on first use."""
        if self._state == "started":
            return self
        if self._state == "closed":
            raise SandboxClosed(f"sandbox {self.id} is closed; create a new one")
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._state == "new":
                try:
                    await self._admitted_start()
                except BaseException:
                    self._state = "closed"
                    await self._close_quietly()
                    raise
                self._state = "started"
                self._renewed_at = time.monotonic()
        return self

    async def _admitted_start(self) -> None:
        gate = self.origin.admission if self.origin is not None else None
        async with admitted(gate) as waited:
            self.admission_wait_s = waited
            began = time.monotonic()
            try:
                await self._start()
                if self.spec.start_script is not None:
                    await self._run_start_script(self.spec.start_script)
            finally:
                self.start_window = (began, time.monotonic())

    async def _run_start_script(self, script: str) -> None:
        """``spec.start_script``, once, before anyone else uses the sandbox (admission held:
        it is part of provisioning); a failure is :class:`DeriveFailed`."""
        req = ExecRequest(
            cmd=script,
            timeout=DERIVE_TIMEOUT_S,
            idle_timeout=None,
            cwd=self.workdir,
            env=dict(self.spec.env),
            stdin=None,
            user=self.spec.user,
            max_output_bytes=self.spec.max_output_bytes,
        )
        res = await self._exec(req)
        if res.exit_code != 0 or res.timed_out:
            what = "timed out" if res.timed_out else f"exit {res.exit_code}"
            raise DeriveFailed(
                f"the start script of sandbox {self.id} (image {self.spec.image}) failed: "
                f"{what}: {res.output.strip()[-800:]}"
            )

    async def close(self) -> None:
        """Remove the sandbox and everything running in it. Idempotent, never raises twice."""
        previous, self._state = self._state, "closed"
        if previous == "started":
            await self._close()

    async def _close_quietly(self) -> None:
        try:
            await self._close()
        except Exception:  # the original error matters more than cleanup noise
            pass

    async def renew(self, lease_s: float | None = None) -> None:
        """Push the lease expiry forward (by ``lease_s`` or the spec's lease) while in use."""
        await self._ensure()
        await self._renew(lease_s if lease_s is not None else self.spec.lease_s)
        self._renewed_at = time.monotonic()

    async def _keep_lease(self) -> None:
        """Renew the lease once half of it has passed since the last renewal (on use)."""
        if time.monotonic() - self._renewed_at >= self.spec.lease_s / 2:
            self._renewed_at = time.monotonic()
            await self._renew(self.spec.lease_s)

    async def _ensure(self) -> None:
        if self._state != "started":
            await self.start()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def fork(self, n: int, *, labels: Mapping[str, str] | None = None) -> list[Sandbox]:
        """``n`` started sandboxes that each begin with this one's files; all or none.

        For a prepared sandbox (dependencies installed, a setup patch applied, a build run)
        whose state n rollouts should share. Each child has this sandbox's spec with new
        ids (its own sandbox and rollout id, the same run id), ``labels`` merged in and
        ``patchgym.fork-of`` naming this sandbox; children are independent of each other
        and of this one (writes on either side are not seen across). Files are carried,
        never processes; fork between commands, as a command still writing may be caught
        mid-write.

        What is carried depends on the backend. Generic (k8s, ags, any backend without a
        snapshot): the workdir only, as one tar stream extracted into n fresh sandboxes of
        the spec (:mod:`patchgym_sandbox.fork`). local: the whole writable state (working
        copy, /tmp, home) copied once and shared read-only beneath each child's own
        overlay. docker: the whole container filesystem, committed to an image the
        children run (the snapshot is removed with the last child, or by ``reap``).
        """
        if n < 1:
            raise ConfigError(f"fork needs n >= 1 sandboxes, got {n}")
        if self._state != "started":
            raise SandboxClosed(
                f"sandbox {self.id} is {self._state}: fork copies a started (prepared) sandbox"
            )
        fields = self.spec.model_dump()
        fields["labels"] = {**self.spec.labels, **(labels or {}), L.FORK_OF: self.id}
        fields["rollout_id"] = None
        await self._keep_lease()
        return await self._fork(SandboxSpec.model_validate(fields), n)

    async def _fork(self, spec: SandboxSpec, n: int) -> list[Sandbox]:
        """Backends with a snapshot override this; the default copies the workdir."""
        from patchgym_sandbox.fork import fork_workdir

        return await fork_workdir(self, spec, n)

    # -- commands ----------------------------------------------------------------
    async def exec(
        self,
        cmd: str | Sequence[str],
        *,
        timeout: float | None = None,
        idle_timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | str | None = None,
        user: str | None = None,
    ) -> ExecResult:
        """Run ``cmd`` with bash; never raises for a non-zero exit or a timeout.

        ``timeout`` is a wall-clock deadline and ``idle_timeout`` fires when no output
        arrives for that long; either kills the whole process tree inside the sandbox.
        """
        await self._ensure()
        for name, value in (("timeout", timeout), ("idle_timeout", idle_timeout)):
            if value is not None and value <= 0:
                raise ConfigError(f"{name} must be > 0 seconds, got {value!r}")
        command = cmd if isinstance(cmd, str) else shlex.join(cmd)
        req = ExecRequest(
            cmd=command,
            timeout=timeout,
            idle_timeout=idle_timeout,
            cwd=paths.resolve(cwd, workdir=self.workdir) if cwd else self.workdir,
            env={**self.spec.env, **(env or {})},
            stdin=stdin.encode() if isinstance(stdin, str) else stdin,
            user=user if user is not None else self.spec.user,
            max_output_bytes=self.spec.max_output_bytes,
        )
        await self._keep_lease()
        res = await self._exec(req)
        if res.unkilled:
            log.warning(
                "sandbox %s: %d process(es) of a command were still alive after SIGKILL "
                "(stuck in the kernel); they go with the sandbox or the kernel: %.80r",
                self.id,
                res.unkilled,
                command,
            )
        return res

    def session(
        self, *, cwd: str | None = None, env: Mapping[str, str] | None = None
    ) -> ShellSession:
        """A persistent interactive shell; use ``async with sandbox.session() as sh``."""
        from patchgym_sandbox.session import ShellSession

        async def opener() -> ShellChannel:
            await self._ensure()
            where = paths.resolve(cwd, workdir=self.workdir) if cwd else self.workdir
            return await self._open_shell(where, {**self.spec.env, **(env or {})})

        return ShellSession(opener)

    # -- files -------------------------------------------------------------------
    def resolve(self, path: str) -> str:
        return paths.resolve(path, workdir=self.workdir, roots=self.file_roots())

    async def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        """Create or replace a file (parents created)."""
        await self._ensure()
        payload = data.encode() if isinstance(data, str) else data
        await self._write_file(self.resolve(path), payload, mode)

    async def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """A regular file's bytes, at most ``max_bytes`` (default :data:`MAX_READ_BYTES`).

        The file is opened once and checked on that handle: a FIFO, socket, device or
        directory is :class:`NotARegularFile` (never opened for reading, so it cannot
        block), a file over the cap is :class:`FileTooLarge` (nothing of it is read
        whole). A symbolic link is judged by what it points to, never by itself.
        """
        await self._ensure()
        cap = MAX_READ_BYTES if max_bytes is None else max_bytes
        if cap < 0:
            raise ConfigError(f"max_bytes must be >= 0, got {max_bytes!r}")
        return await self._read_file(self.resolve(path), cap)

    async def read_text(self, path: str, *, max_bytes: int | None = None) -> str:
        return (await self.read_file(path, max_bytes=max_bytes)).decode("utf-8", errors="replace")

    async def upload(self, source: str | os.PathLike[str], dest: str) -> None:
        """Copy a local file or directory to ``dest`` in the sandbox as one tar stream."""
        await self._ensure()
        src = Path(source)
        if not src.exists():
            raise FileNotFoundError(f"upload source {src} does not exist")
        target = self.resolve(dest)
        parent, name = target.rsplit("/", 1) if target != "/" else ("/", "")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(str(src), arcname=name or ".")
        await self._put_archive(parent or "/", buf.getvalue())

    async def download(self, source: str, dest: str | os.PathLike[str]) -> None:
        """Copy a sandbox file or directory to the local path ``dest``."""
        await self._ensure()
        data = await self._get_archive(self.resolve(source))
        out = Path(dest)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            members = tar.getmembers()
            if not members:
                return
            root = members[0].name.split("/", 1)[0]
            out.parent.mkdir(parents=True, exist_ok=True)
            for m in members:
                rel = m.name[len(root) :].lstrip("/")
                m.name = str(Path(out.name) / rel) if rel else out.name
            try:
                tar.extractall(out.parent, members=members, filter=tarsafe.within(out))
            except tarfile.FilterError as exc:
                raise tarsafe.refused(exc, out) from exc

    async def put_archive(self, dest_dir: str, tar_bytes: bytes) -> None:
        """Extract an uncompressed tar stream into ``dest_dir`` (created if missing)."""
        await self._ensure()
        await self._put_archive(self.resolve(dest_dir), tar_bytes)

    async def get_archive(self, path: str) -> bytes:
        """A tar stream of ``path`` whose single top-level entry is its basename."""
        await self._ensure()
        return await self._get_archive(self.resolve(path))

    # -- backend primitives --------------------------------------------------------
    @abstractmethod
    async def _start(self) -> None: ...

    @abstractmethod
    async def _close(self) -> None: ...

    @abstractmethod
    async def _exec(self, req: ExecRequest) -> ExecResult: ...

    @abstractmethod
    async def _open_shell(self, cwd: str, env: Mapping[str, str]) -> ShellChannel: ...

    @abstractmethod
    async def _write_file(self, path: str, data: bytes, mode: int) -> None: ...

    @abstractmethod
    async def _read_file(self, path: str, max_bytes: int) -> bytes:
        """Raise :class:`FileTooLarge` past ``max_bytes``, :class:`NotARegularFile` for
        anything but a regular file (checked before reading, never by the link itself)."""

    @abstractmethod
    async def _put_archive(self, dest_dir: str, data: bytes) -> None: ...

    @abstractmethod
    async def _get_archive(self, path: str) -> bytes: ...

    async def _renew(self, lease_s: float) -> None:
        """Backends that store the lease outside the sandbox override this."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id} {self._state} image={self.spec.image!r} template={self.spec.template!r}>"
