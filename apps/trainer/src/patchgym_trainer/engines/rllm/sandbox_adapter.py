"""Our sandbox behind rLLM's ``Sandbox`` protocol (``rllm.sandbox.protocol.Sandbox``).

rLLM's protocol is blocking: ``exec(command, timeout, user) -> str`` returns stdout and
raises on a non-zero exit (``subprocess.CalledProcessError``, which rLLM's helpers
catch); ``upload_file`` / ``upload_dir`` copy from the local machine; ``close`` destroys;
``is_alive`` never raises. This adapter drives one of our async sandboxes through the
sync facade's loop thread, so it works from rLLM's worker threads. No rLLM import: the
protocol is structural.

``user``: rLLM's harnesses pass ``user="root"``; rLLM's protocol lets a backend without
users ignore it. A backend that refuses ``user`` (the local one raises ``ConfigError``)
gets the command without it, and the adapter logs that once per sandbox.
"""

from __future__ import annotations

import logging
import subprocess
from typing import Any

from patchgym_sandbox import ConfigError, SandboxError, SyncBackend, SyncSandbox

_log = logging.getLogger(__name__)


class RLLMSandbox:
    """``rllm.sandbox.protocol.Sandbox`` over a patchgym sandbox (see module docstring)."""

    def __init__(self, sandbox: SyncSandbox, *, default_timeout_s: float = 600.0) -> None:
        self._sb = sandbox
        self.default_timeout_s = default_timeout_s
        self._users_ignored = False

    @classmethod
    def create(cls, backend: SyncBackend, **spec: Any) -> RLLMSandbox:
        """Start a sandbox from a sync backend (``SyncBackend({"type": "docker"})``)."""
        return cls(backend.sandbox(**spec).start())

    @property
    def sandbox(self) -> SyncSandbox:
        return self._sb

    def exec(self, command: str, timeout: float | None = None, user: str | None = None) -> str:
        deadline = timeout or self.default_timeout_s
        if user is not None and not self._users_ignored:
            try:
                res = self._sb.exec(command, timeout=deadline, user=user)
            except ConfigError as exc:
                self._users_ignored = True
                _log.warning("sandbox has no users (%s); ignoring user=%r from now on", exc, user)
                res = self._sb.exec(command, timeout=deadline)
        else:
            res = self._sb.exec(command, timeout=deadline)
        if res.timed_out:
            raise subprocess.TimeoutExpired(command, deadline, res.stdout, res.stderr)
        if res.exit_code != 0:
            raise subprocess.CalledProcessError(res.exit_code, command, res.stdout, res.stderr)
        return res.stdout

    def upload_file(self, local_path: str, remote_path: str) -> None:
        self._sb.upload(local_path, remote_path)

    def upload_dir(self, local_path: str, remote_path: str) -> None:
        self._sb.upload(local_path, remote_path)

    def close(self) -> None:
        self._sb.close()

    def is_alive(self) -> bool:
        inner = self._sb.sandbox
        if inner.closed or not inner.started:
            return False
        try:
            return self._sb.exec("true", timeout=30).exit_code == 0
        except (SandboxError, OSError, RuntimeError):
            return False
