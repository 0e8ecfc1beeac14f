"""The ``ags`` / ``e2b`` backend: provisioning through the e2b SDK's control plane."""

from __future__ import annotations

import inspect
import json
import logging
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import e2b
from e2b import AsyncSandbox, SandboxQuery
from pydantic import SecretStr

from patchgym_ags.config import CloudSandboxConfig
from patchgym_ags.errors import is_retryable, map_create_error, map_runtime_error, scrub
from patchgym_ags.ratelimit import CreateLimiter
from patchgym_ags.toolnames import tool_name
from patchgym_sandbox import labels as L
from patchgym_sandbox.backend import SandboxBackend, SandboxInfo
from patchgym_sandbox.errors import ConfigError, CreateTimeout
from patchgym_sandbox.retry import Retry
from patchgym_sandbox.spec import SandboxSpec

if TYPE_CHECKING:
    from patchgym_ags.sandbox import AgsSandbox

log = logging.getLogger("patchgym_ags")

CUSTOM_CONFIG_KEY = "x-custom-config"
LEASE_GRACE_KEY = "patchgym.lease-grace-s"
_CREATE_TAKES_IDEMPOTENCY_KEY = (
    "idempotency_key" in inspect.signature(AsyncSandbox.create).parameters
)


class AgsBackend(SandboxBackend):
    name = "ags"
    config: CloudSandboxConfig

    def __init__(self, config: CloudSandboxConfig) -> None:
        super().__init__(config)
        self._key: SecretStr = config.resolve_api_key()
        self._limiter = CreateLimiter(config.max_concurrent_creates, config.creates_per_second)

    def __repr__(self) -> str:
        return f"<AgsBackend type={self.config.type} domain={self.config.domain!r} api_url={self.config.api_url!r}>"

    # -- SDK plumbing --------------------------------------------------------------
    def api_opts(self) -> dict[str, Any]:
        """Connection options for every SDK call (the key is only handed to the SDK)."""
        opts: dict[str, Any] = {
            "api_key": self._key.get_secret_value(),
            "request_timeout": self.config.request_timeout_s,
        }
        for name in ("domain", "api_url", "sandbox_url"):
            value = getattr(self.config, name)
            if value:
                opts[name] = value
        return opts

    @property
    def secret(self) -> SecretStr:
        return self._key

    def _make_sandbox(self, spec: SandboxSpec) -> AgsSandbox:
        from patchgym_ags.sandbox import AgsSandbox

        return AgsSandbox(self, spec)

    # -- what to create ------------------------------------------------------------------
    def template_for(self, spec: SandboxSpec) -> str | None:
        if spec.template:
            return spec.template
        if spec.image and not self.config.image_override:
            return tool_name(spec.image)
        return self.config.template

    def metadata_for(self, spec: SandboxSpec, sandbox_id: str) -> dict[str, str]:
        meta = {**self.config.metadata, **spec.all_labels(sandbox_id)}
        meta[LEASE_GRACE_KEY] = str(self.config.lease_grace_s)
        if spec.image and self.config.image_override:
            custom: dict[str, Any] = {"image": spec.image, **self.config.custom_config}
            if self.config.image_registry_type:
                custom.setdefault("imageRegistryType", self.config.image_registry_type)
            if spec.resources.cpus or spec.resources.memory_mb:
                res = dict(custom.get("resources") or {})
                if spec.resources.cpus:
                    res.setdefault("cpu", str(spec.resources.cpus))
                if spec.resources.memory_mb:
                    res.setdefault("memory", f"{spec.resources.memory_mb}Mi")
                custom["resources"] = res
            meta[CUSTOM_CONFIG_KEY] = json.dumps(custom, separators=(",", ":"), sort_keys=True)
        return meta

    def timeout_for(self, lease_s: float) -> int:
        return min(self.config.max_timeout_s, math.ceil(lease_s) + self.config.lease_grace_s)

    # -- create with retries -------------------------------------------------------------
    async def create(self, spec: SandboxSpec, sandbox_id: str) -> AsyncSandbox:
        """Create one sandbox: rate-limited, retried under ``create_retry``, idempotent."""
        template = self.template_for(spec)
        if spec.image and not template and self.config.image_override:
            raise ConfigError(
                f"spec.image={spec.image!r} needs a base tool to override: set `template` in the "
                f"{self.config.type!r} sandbox config (the tool made by `patchgym-ags tools sync`)"
            )
        kwargs: dict[str, Any] = {
            "template": template,
            "timeout": self.timeout_for(spec.lease_s),
            "metadata": self.metadata_for(spec, sandbox_id),
            "envs": dict(spec.env),
            **self.api_opts(),
        }
        if self.config.send_network_policy:
            kwargs["allow_internet_access"] = spec.network
        if _CREATE_TAKES_IDEMPOTENCY_KEY:
            kwargs["idempotency_key"] = sandbox_id
        what = f"create sandbox {sandbox_id} (template {template!r})"
        policy = self.config.create_retry.model_copy(
            update={"deadline_s": self.config.create_timeout_s}
        )
        retry = Retry(
            policy,
            when=is_retryable,
            what=what,
            describe=lambda e: scrub(f"{type(e).__name__}: {e}", self._key),
        )
        async with self._limiter.slot():
            try:
                return await retry.acall(AsyncSandbox.create, between=self._limiter.pace, **kwargs)
            except Exception as exc:
                if retry.deadline_hit:
                    raise CreateTimeout(
                        scrub(
                            f"{what}: gave up after {retry.attempts} attempts within "
                            f"create_timeout_s={self.config.create_timeout_s}: {exc}",
                            self._key,
                        )
                    ) from None
                raise map_create_error(exc, what=what, secret=self._key) from None

    # -- list / remove -------------------------------------------------------------------
    async def list_sandboxes(self, labels: Mapping[str, str] | None = None) -> list[SandboxInfo]:
        query = SandboxQuery(metadata={L.MANAGED: "true", **(labels or {})})
        out: list[SandboxInfo] = []
        try:
            pager = AsyncSandbox.list(query=query, **self.api_opts())
            while pager.has_next:
                for item in await pager.next_items():
                    meta = dict(item.metadata or {})
                    meta.pop(CUSTOM_CONFIG_KEY, None)
                    grace = _int(meta.get(LEASE_GRACE_KEY), self.config.lease_grace_s)
                    end_at = getattr(item, "end_at", None)
                    if end_at is not None:
                        meta[L.EXPIRES_AT] = str(int(end_at.timestamp()) - grace)
                    state = getattr(item, "state", None)
                    out.append(
                        SandboxInfo(id=item.sandbox_id, labels=meta, state=str(state or "running"))
                    )
        except Exception as exc:
            raise map_runtime_error(exc, what="list sandboxes", secret=self._key) from None
        return out

    async def remove(self, sandbox_id: str) -> None:
        try:
            await AsyncSandbox.kill(sandbox_id, **self.api_opts())
        except e2b.NotFoundException:
            return
        except Exception as exc:
            raise map_runtime_error(
                exc, what=f"kill sandbox {sandbox_id}", secret=self._key
            ) from None

    async def set_timeout(self, sandbox_id: str, timeout_s: int) -> None:
        try:
            await AsyncSandbox.set_timeout(sandbox_id, timeout_s, **self.api_opts())
        except Exception as exc:
            raise map_runtime_error(
                exc, what=f"extend sandbox {sandbox_id}", secret=self._key
            ) from None

    async def aclose(self) -> None:
        """The SDK pools connections process-wide; nothing of ours to release."""


def _int(raw: str | None, default: int) -> int:
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default
