"""k8s-specific errors and the mapping from API failures to patchgym's typed errors."""

from __future__ import annotations

import json
from typing import Any

from patchgym_sandbox.errors import (
    BackendUnavailable,
    ConfigError,
    InfraError,
    RateLimited,
    SandboxError,
)
from patchgym_sandbox.errors import SandboxFileError as SandboxFileError  # moved to core
from patchgym_sandbox.retry import retry_after_of


class ApiFailure(InfraError):
    """A Kubernetes API call failed; ``status`` is the HTTP status (0: no response)."""

    def __init__(self, message: str, *, status: int = 0, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class ExecStalled(InfraError, TimeoutError):
    """An exec stream gave no status well past the command's own deadline."""


def status_message(body: Any) -> str:
    """The ``message`` of a Kubernetes Status body, or the raw text."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            data = json.loads(body)
        except ValueError:
            return body.strip()[:500]
        if isinstance(data, dict) and "message" in data:
            return str(data["message"])
        return body.strip()[:500]
    return str(body)


def from_api_exception(exc: Exception, what: str) -> InfraError | SandboxError:
    """Map a client ``ApiException`` (or a connection error) to a typed error."""
    status = int(getattr(exc, "status", 0) or 0)
    message = status_message(getattr(exc, "body", None) or getattr(exc, "reason", None) or exc)
    after = retry_after_of(exc)
    if status == 429:
        return RateLimited(
            f"{what}: the API server is rate limiting ({message})", retry_after=after
        )
    if status in (401, 403):
        return ConfigError(
            f"{what}: the Kubernetes API refused the credentials or RBAC ({status}: {message}); "
            "check the kubeconfig / service account permissions for pods and pods/exec"
        )
    if status == 422 or status == 400:
        return ConfigError(f"{what}: the API rejected the request as invalid ({message})")
    if status == 0:
        return BackendUnavailable(f"{what}: cannot reach the Kubernetes API ({message})")
    return ApiFailure(f"{what}: HTTP {status}: {message}", status=status, retry_after=after)
