"""The Engine API client, its thread pool, error translation and retries.

The docker SDK is blocking, so every call runs in a bounded pool owned by the backend and
the event loop never waits on a socket. Failures of the engine surface as typed
:class:`~patchgym_sandbox.errors.InfraError`\\ s; only idempotent calls are retried, and
only on errors that may go away (connection trouble, 5xx, 429), under the shared
:class:`~patchgym_sandbox.retry.RetryPolicy` (``DockerConfig.retry``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import docker
import docker.errors
import requests.exceptions
from docker.utils import kwargs_from_env

from patchgym_sandbox.errors import (
    BackendUnavailable,
    ImageNotFound,
    InfraError,
    RateLimited,
    SandboxError,
    SandboxLost,
)
from patchgym_sandbox.offload import run_blocking
from patchgym_sandbox.retry import Retry, RetryPolicy, retry_after_of

if TYPE_CHECKING:
    from docker import APIClient

    from patchgym_docker.config import DockerConfig

T = TypeVar("T")

TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})


def status_of(exc: BaseException) -> int | None:
    if isinstance(exc, docker.errors.APIError):
        code = exc.status_code
        return int(code) if code is not None else None
    return None


def is_connection_error(exc: BaseException) -> bool:
    """The engine could not be reached at all (refused, socket missing, reset)."""
    if isinstance(exc, requests.exceptions.ConnectionError | ConnectionError | FileNotFoundError):
        return True
    # The SDK wraps a failed version probe in a bare DockerException.
    return type(exc) is docker.errors.DockerException and "Connection" in str(exc)


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, SandboxError):  # already decided (missing file, lost sandbox...)
        return isinstance(exc, BackendUnavailable)
    if is_connection_error(exc) or isinstance(exc, requests.exceptions.Timeout):
        return True
    status = status_of(exc)
    return status in TRANSIENT_STATUS


def explain(exc: BaseException) -> str:
    if isinstance(exc, docker.errors.APIError):
        return str(exc.explanation or exc)
    return f"{type(exc).__name__}: {exc}"


def translate(exc: BaseException, what: str, *, lost_if_missing: str | None = None) -> SandboxError:
    """Map an SDK / transport error to our hierarchy. ``what`` names the failed operation.

    ``lost_if_missing``: the sandbox id to report as lost when the engine says 404.
    """
    if isinstance(exc, SandboxError):
        return exc
    if isinstance(exc, docker.errors.ImageNotFound):
        return ImageNotFound(f"{what}: image not found ({explain(exc)}); build or pull it first")
    status = status_of(exc)
    if lost_if_missing is not None and (
        status == 404 or (status == 409 and "is not running" in explain(exc))
    ):
        return SandboxLost(f"sandbox {lost_if_missing} is gone ({what}: {explain(exc)})")
    if status == 429:
        return RateLimited(
            f"{what}: the engine refused for now ({explain(exc)})", retry_after=retry_after_of(exc)
        )
    if is_connection_error(exc):
        return BackendUnavailable(
            f"{what}: cannot reach the Docker engine ({explain(exc)}); is dockerd running and "
            "DOCKER_HOST / base_url right?"
        )
    if isinstance(exc, requests.exceptions.Timeout):
        return InfraError(f"{what}: the Docker engine did not answer in time ({explain(exc)})")
    return InfraError(f"{what}: {explain(exc)}")


NO_RETRY = RetryPolicy(attempts=1)


class Engine:
    """A lazily connected ``APIClient`` plus the thread pool every blocking call runs in."""

    def __init__(self, config: DockerConfig) -> None:
        self.config = config
        self._client: APIClient | None = None
        self._client_lock = threading.Lock()
        self._executor = ThreadPoolExecutor(
            config.max_threads, thread_name_prefix="patchgym-docker"
        )

    @property
    def api(self) -> APIClient:
        """The client (connects and negotiates the API version on first use; call in a worker)."""
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    self._client = self._connect()
        return self._client

    def _connect(self) -> APIClient:
        kwargs: dict[str, Any] = {
            "version": self.config.api_version,
            "timeout": self.config.timeout_s,
            "max_pool_size": self.config.max_threads,
        }
        try:
            if self.config.base_url is None:
                return docker.APIClient(**kwargs_from_env(), **kwargs)
            return docker.APIClient(base_url=self.config.base_url, **kwargs)
        except docker.errors.DockerException as exc:
            where = self.config.base_url or "DOCKER_HOST / the default socket"
            raise BackendUnavailable(
                f"cannot reach the Docker engine at {where} ({exc}); start dockerd or set base_url"
            ) from exc

    async def run(self, fn: Callable[[], T]) -> T:
        """Run a blocking callable in the pool (no translation, no retry); at interpreter
        exit, when the pool is shut, in a thread of its own (closing what was left open)."""
        return await run_blocking(fn, executor=self._executor)

    async def call(
        self,
        what: str,
        fn: Callable[[APIClient], T],
        *,
        idempotent: bool,
        lost_if_missing: str | None = None,
    ) -> T:
        """Run ``fn(api)`` in the pool; retry transient failures when ``idempotent``; translate."""
        return await self.run(
            lambda: self.call_blocking(
                what, fn, idempotent=idempotent, lost_if_missing=lost_if_missing
            )
        )

    def call_blocking(
        self,
        what: str,
        fn: Callable[[APIClient], T],
        *,
        idempotent: bool,
        lost_if_missing: str | None = None,
    ) -> T:
        policy = self.config.retry if idempotent else NO_RETRY
        try:
            return Retry(policy, when=is_transient, what=what).call(fn, self.api)
        except Exception as exc:
            raise translate(exc, what, lost_if_missing=lost_if_missing) from exc

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self._client is not None:
            self._client.close()
            self._client = None
