"""patchgym sandboxes: one async protocol, many backends, found by entry point.

>>> from patchgym_sandbox import create_backend, SandboxSpec
>>> backend = create_backend({"type": "local"})
>>> async with backend.sandbox(SandboxSpec(template="repo/")) as sb:
...     result = await sb.exec("pytest -q", timeout=60)
"""

from patchgym_sandbox.admission import Admission, LocalAdmission
from patchgym_sandbox.backend import BackendConfig, PrepareReport, SandboxBackend, SandboxInfo
from patchgym_sandbox.derived import DerivedImage
from patchgym_sandbox.errors import (
    BackendNotInstalled,
    BackendUnavailable,
    ConfigError,
    CreateTimeout,
    DeriveFailed,
    FileTooLarge,
    ImageNotFound,
    InfraError,
    IsolationUnavailable,
    LimitUnavailable,
    NotARegularFile,
    PathOutsideSandbox,
    RateLimited,
    SandboxClosed,
    SandboxError,
    SandboxFileError,
    SandboxFileNotFound,
    SandboxLost,
    SessionError,
    UnknownBackend,
)
from patchgym_sandbox.groups import SandboxGroups
from patchgym_sandbox.pool import SandboxPool, start_group
from patchgym_sandbox.registry import available_backends, create_backend, load_config
from patchgym_sandbox.result import ExecResult
from patchgym_sandbox.sandbox import ExecRequest, Sandbox
from patchgym_sandbox.session import SessionResult, ShellChannel, ShellSession
from patchgym_sandbox.spec import Resources, SandboxSpec
from patchgym_sandbox.sync import SyncBackend, SyncSandbox

__version__ = "0.1.0"

__all__ = [
    "Admission",
    "BackendConfig",
    "BackendNotInstalled",
    "BackendUnavailable",
    "ConfigError",
    "CreateTimeout",
    "DeriveFailed",
    "DerivedImage",
    "ExecRequest",
    "ExecResult",
    "FileTooLarge",
    "ImageNotFound",
    "InfraError",
    "IsolationUnavailable",
    "LimitUnavailable",
    "LocalAdmission",
    "NotARegularFile",
    "PathOutsideSandbox",
    "PrepareReport",
    "RateLimited",
    "Resources",
    "Sandbox",
    "SandboxBackend",
    "SandboxClosed",
    "SandboxError",
    "SandboxFileError",
    "SandboxFileNotFound",
    "SandboxGroups",
    "SandboxInfo",
    "SandboxLost",
    "SandboxPool",
    "SandboxSpec",
    "SessionError",
    "SessionResult",
    "ShellChannel",
    "ShellSession",
    "SyncBackend",
    "SyncSandbox",
    "UnknownBackend",
    "available_backends",
    "create_backend",
    "load_config",
    "start_group",
]
