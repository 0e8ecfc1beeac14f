"""Configs of the ``ags`` and ``e2b`` backends (cheap to import: no SDK here).

Both run sandboxes through the official ``e2b`` SDK; they differ in defaults. ``ags`` talks
to Tencent Cloud Agent Sandbox (``<region>.tencentags.com``) and by default overrides the
tool's image per sandbox through ``metadata["x-custom-config"]``; ``e2b`` talks to E2B and
maps an image to a template name. The API key is a :class:`~pydantic.SecretStr`: it never
appears in a repr, a log line or an error message.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, SecretStr, model_validator

from patchgym_sandbox.backend import BackendConfig, CheckRow
from patchgym_sandbox.errors import ConfigError
from patchgym_sandbox.retry import RetryPolicy

if TYPE_CHECKING:
    from patchgym_ags.backend import AgsBackend

AGS_DOMAIN_SUFFIX = "tencentags.com"


class CloudSandboxConfig(BackendConfig):
    """Fields shared by ``ags`` and ``e2b``; see the package README for a walk-through."""

    domain: str | None = None
    """Sandbox domain, e.g. ``ap-guangzhou.tencentags.com``; the SDK default (``e2b.app``) when unset."""
    region: str | None = None
    """AGS region (``ap-guangzhou``); sets ``domain`` to ``<region>.tencentags.com`` when ``domain`` is unset."""
    api_key: SecretStr | None = None
    """The API key itself. Prefer ``api_key_env`` or ``api_key_file`` so it stays out of config files."""
    api_key_env: str = "E2B_API_KEY"
    """Environment variable read when ``api_key`` is unset."""
    api_key_file: Path | None = None
    """File holding the key (first line), read when ``api_key`` is unset; wins over the variable."""
    api_url: str | None = None
    """Control-plane URL override (self-hosted or the local stand-in)."""
    sandbox_url: str | None = None
    """envd URL override (the local stand-in serves every sandbox on one URL)."""

    template: str | None = None
    """Template (E2B) or sandbox tool name (AGS) used when the spec names none."""
    image_override: bool = False
    """Send ``spec.image`` as ``metadata["x-custom-config"]`` (AGS) instead of mapping it to a tool name."""
    image_registry_type: str | None = None
    """``imageRegistryType`` for the override: ``enterprise`` (TCR), ``personal`` (CCR) or ``custom``."""
    custom_config: dict[str, Any] = Field(default_factory=dict)
    """Extra ``x-custom-config`` keys (``command``, ``args``, ``resources``, ``probe``, ...)."""
    metadata: dict[str, str] = Field(default_factory=dict)
    """Extra metadata on every sandbox (our labels are always added)."""

    lease_grace_s: int = Field(default=120, ge=0)
    """The provider's own timeout is the lease plus this grace, so ``reap()`` sees expired
    leases first and the provider still cleans up after a crashed reaper."""
    max_timeout_s: int = Field(default=86_400, gt=0)
    """Longest sandbox timeout the provider accepts (24 h on AGS and E2B Pro)."""
    request_timeout_s: float = Field(default=60.0, gt=0)
    """Per-request timeout of control-plane and file calls."""
    create_timeout_s: float = Field(default=600.0, gt=0)
    """Total time a create may take, retries and rate-limit waits included."""
    create_retry: RetryPolicy = Field(
        default_factory=lambda: RetryPolicy(attempts=9, base_s=0.5, max_s=30.0)
    )
    """Create retries on throttling, 5xx and timeouts (the shared policy; bounded by
    ``create_timeout_s``)."""
    max_concurrent_creates: int = Field(default=16, gt=0)
    creates_per_second: float = Field(default=10.0, gt=0)
    exec_via: Literal["execd", "envd", "commands"] = "execd"
    """``execd``: one long-lived in-sandbox daemon runs every command under sandbox-core's
    ``supervise`` (one ``SendInput`` per command, no interpreter start); ``envd``: a one-shot
    supervisor per command via envd's ``Process.Start`` (no shell); ``commands``: the SDK's
    ``sandbox.commands.run``, which wraps every command in ``bash -l -c``."""
    send_network_policy: bool = True
    """Send ``allow_internet_access = spec.network`` on create. AGS sets the network per tool
    (``NetworkConfiguration``), so the ``ags`` default leaves it to the tool."""
    python: str = "python3"
    """Interpreter inside the sandbox that runs the supervisor."""
    exec_grace_s: float = Field(default=60.0, gt=0)
    """How long past a command's deadline the client waits for the in-sandbox kill to report."""

    @model_validator(mode="after")
    def _check(self) -> CloudSandboxConfig:
        if self.region and not self.domain:
            self.domain = f"{self.region}.{AGS_DOMAIN_SUFFIX}"
        return self

    def checks(self) -> list[CheckRow]:
        try:
            self.resolve_api_key()
        except ConfigError as exc:
            fix = f"export {self.api_key_env}=<your {self.type.upper()} API key> (or sandbox.api_key_file=<path>)"
            return [
                CheckRow(name="credentials", status="fail", detail=f"{self.type}: {exc}", fix=fix)
            ]
        return [CheckRow(name="credentials", status="pass", detail=f"{self.type}: API key found")]

    def resolve_api_key(self) -> SecretStr:
        """The key from ``api_key``, ``api_key_file`` or ``api_key_env`` (in that order)."""
        if self.api_key is not None:
            return self.api_key
        if self.api_key_file is not None:
            try:
                text = self.api_key_file.read_text().strip().splitlines()
            except OSError as exc:
                raise ConfigError(
                    f"cannot read api_key_file {str(self.api_key_file)!r}: {exc.strerror}; "
                    "point it at a readable file holding the key"
                ) from None
            if not text or not text[0].strip():
                raise ConfigError(f"api_key_file {str(self.api_key_file)!r} is empty")
            return SecretStr(text[0].strip())
        value = os.environ.get(self.api_key_env)
        if not value:
            raise ConfigError(
                f"no API key: set the environment variable {self.api_key_env}, or api_key_file, "
                f"in the {self.type!r} sandbox config"
            )
        return SecretStr(value)

    def build(self) -> AgsBackend:
        from patchgym_ags.backend import AgsBackend

        return AgsBackend(self)

    def create_rate(self) -> float | None:
        return self.creates_per_second


class AgsConfig(CloudSandboxConfig):
    """Tencent Cloud Agent Sandbox: one tool serves many task images via ``x-custom-config``."""

    type: Literal["ags"] = "ags"
    image_override: bool = True
    send_network_policy: bool = False


class E2bConfig(CloudSandboxConfig):
    """E2B (or a self-hosted E2B): images map to template names."""

    type: Literal["e2b"] = "e2b"
