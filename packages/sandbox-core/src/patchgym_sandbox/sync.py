"""A blocking facade for scripts and notebooks.

Works whether or not an event loop is already running in the calling thread (Jupyter
runs one): every call is submitted to a private loop on a background thread, so no
``asyncio.run`` is needed and nothing nests. Library code should use the async API.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

from patchgym_sandbox.backend import BackendConfig, SandboxBackend
from patchgym_sandbox.registry import create_backend
from patchgym_sandbox.result import ExecResult
from patchgym_sandbox.sandbox import Sandbox
from patchgym_sandbox.spec import SandboxSpec

T = TypeVar("T")


class _LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="patchgym-sync", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        self.loop.close()


class SyncSandbox:
    """Blocking wrapper around one :class:`Sandbox`; use as a context manager."""

    def __init__(self, runner: _LoopThread, sandbox: Sandbox) -> None:
        self._run = runner.run
        self.sandbox = sandbox

    @property
    def id(self) -> str:
        return self.sandbox.id

    @property
    def workdir(self) -> str:
        return self.sandbox.workdir

    def start(self) -> Self:
        self._run(self.sandbox.start())
        return self

    def exec(self, cmd: str | Sequence[str], **kw: Any) -> ExecResult:
        return self._run(self.sandbox.exec(cmd, **kw))

    def write_file(self, path: str, data: bytes | str) -> None:
        self._run(self.sandbox.write_file(path, data))

    def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        return self._run(self.sandbox.read_file(path, max_bytes=max_bytes))

    def read_text(self, path: str) -> str:
        return self._run(self.sandbox.read_text(path))

    def upload(self, source: str, dest: str) -> None:
        self._run(self.sandbox.upload(source, dest))

    def download(self, source: str, dest: str) -> None:
        self._run(self.sandbox.download(source, dest))

    def close(self) -> None:
        self._run(self.sandbox.close())

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class SyncBackend:
    """Blocking wrapper around a backend: ``with SyncBackend({"type": "local"}) as b: ...``."""

    def __init__(self, config: Mapping[str, Any] | BackendConfig) -> None:
        self._runner = _LoopThread()
        self.backend: SandboxBackend = create_backend(config)

    def sandbox(self, spec: SandboxSpec | None = None, **fields: Any) -> SyncSandbox:
        return SyncSandbox(self._runner, self.backend.sandbox(spec, **fields))

    def reap(self, labels: Mapping[str, str] | None = None, *, expired: bool = True) -> list[str]:
        return self._runner.run(self.backend.reap(labels, expired=expired))

    def close(self) -> None:
        self._runner.run(self.backend.aclose())
        self._runner.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
