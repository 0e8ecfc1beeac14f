"""Exception hierarchy.

One root, :class:`SandboxError`. :class:`InfraError` and its subclasses mean the
*infrastructure* failed (lost sandbox, rate limit, missing image, create timeout):
a trainer should drop or retry such a rollout instead of learning from a fake zero
reward. Everything else is about what the task or the caller did. Each class also
subclasses the matching builtin so ``except TimeoutError`` keeps working.
"""

from __future__ import annotations


class SandboxError(Exception):
    """Root of every error raised by patchgym sandboxes."""


class InfraError(SandboxError):
    """The sandbox infrastructure failed; the rollout says nothing about the policy."""


class SandboxLost(InfraError, ConnectionError):
    """The sandbox disappeared (killed, evicted, deleted from outside) while in use."""


class CreateTimeout(InfraError, TimeoutError):
    """The sandbox did not become ready within the create timeout."""


class RateLimited(InfraError, ConnectionError):
    """The provider refused to create more sandboxes for now (HTTP 429 or a quota)."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ImageNotFound(InfraError, LookupError):
    """The image or template does not exist or cannot be pulled."""


class DeriveFailed(InfraError):
    """A derivation script (``SandboxBackend.derive_image``, ``SandboxSpec.start_script``)
    exited non-zero in the image: the image, not the policy, is at fault (the message has
    the image and the script's output tail)."""


class BackendUnavailable(InfraError, ConnectionError):
    """The engine / cluster / API cannot be reached at all."""


class ConfigError(SandboxError, ValueError):
    """A sandbox or backend configuration is invalid; the message names the field."""


class UnknownBackend(ConfigError, LookupError):
    """No backend is registered under the requested ``type``."""


class BackendNotInstalled(SandboxError, ImportError):
    """The backend is known but the package or SDK it needs is not installed."""


class IsolationUnavailable(SandboxError, RuntimeError):
    """Isolation was requested but this machine cannot provide it."""


class LimitUnavailable(IsolationUnavailable, InfraError):
    """A requested resource limit cannot be enforced on this machine (names the fix on
    that host): an infrastructure failure, never the policy's."""


class PathOutsideSandbox(SandboxError, PermissionError):
    """A file path resolves outside the sandbox root."""


class SandboxClosed(SandboxError, RuntimeError):
    """The sandbox was used after ``close()``."""


class SandboxFileNotFound(SandboxError, FileNotFoundError):
    """A file or directory inside the sandbox does not exist."""


class SandboxFileError(SandboxError, OSError):
    """A file operation failed because of what the sandbox holds (a link where a directory
    should be, permissions, not a directory): the task's doing, not the infrastructure's."""


class NotARegularFile(SandboxFileNotFound):
    """The path is a FIFO, socket, device or directory; file reads and writes refuse it."""

    def __init__(self, message: str, *, kind: str = "not a regular file") -> None:
        super().__init__(message)
        self.kind = kind


class FileTooLarge(SandboxError, OSError):
    """A file is larger than the read's byte cap; nothing of it was returned."""

    def __init__(self, message: str, *, size: int | None = None, limit: int = 0) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit


class SessionError(SandboxError, RuntimeError):
    """The interactive shell session died or its protocol broke."""
