"""``DockerBackend``: provisioning (create lazily, list, remove, reap, prepare) on the Engine API."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import docker.errors

from patchgym_docker.config import DockerConfig
from patchgym_docker.engine import Engine, explain, status_of
from patchgym_docker.fork import reap_images
from patchgym_docker.prepare import prepare_images
from patchgym_docker.sandbox import BACKEND_LABEL, DockerSandbox
from patchgym_sandbox import labels as L
from patchgym_sandbox.backend import PrepareReport, SandboxBackend, SandboxInfo
from patchgym_sandbox.derived import DerivedImage
from patchgym_sandbox.spec import SandboxSpec

if TYPE_CHECKING:
    from docker import APIClient


class DockerBackend(SandboxBackend):
    name = "docker"
    config: DockerConfig

    def __init__(self, config: DockerConfig) -> None:
        super().__init__(config)
        self.engine = Engine(config)

    def _make_sandbox(self, spec: SandboxSpec) -> DockerSandbox:
        return DockerSandbox(self, spec)

    async def ping(self) -> None:
        """Raise BackendUnavailable unless the engine answers."""
        await self.engine.call("ping the Docker engine", lambda api: api.ping(), idempotent=True)

    async def list_sandboxes(self, labels: Mapping[str, str] | None = None) -> list[SandboxInfo]:
        """Containers with our labels, this config's ``labels`` and ``labels`` (all must match)."""
        wanted = {
            L.MANAGED: "true",
            BACKEND_LABEL: "docker",
            **self.config.labels,
            **(labels or {}),
        }
        selector = [f"{k}={v}" for k, v in wanted.items()]

        def query(api: APIClient) -> list[SandboxInfo]:
            found = api.containers(all=True, filters={"label": selector})
            out = []
            for c in found:
                tags = c.get("Labels") or {}
                name = (c.get("Names") or [""])[0].lstrip("/")
                out.append(
                    SandboxInfo(
                        id=tags.get(L.SANDBOX_ID, name),
                        labels=tags,
                        state=c.get("State", "unknown"),
                    )
                )
            return out

        return await self.engine.call("list sandboxes", query, idempotent=True)

    async def remove(self, sandbox_id: str) -> None:
        await self.remove_container(sandbox_id)

    async def reap(
        self, labels: Mapping[str, str] | None = None, *, expired: bool = True
    ) -> list[str]:
        """Containers by the shared rule, then the fork images nothing uses any more."""
        removed = await super().reap(labels, expired=expired)
        await reap_images(self, labels, expired=expired)
        return removed

    async def remove_container(self, ref: str) -> None:
        """Force-remove a container (and its anonymous volumes); already gone is success."""

        def rm(api: APIClient) -> None:
            try:
                api.remove_container(ref, force=True, v=True)
            except docker.errors.NotFound:
                return
            except docker.errors.APIError as exc:
                if status_of(exc) == 409 and "already in progress" in explain(exc):
                    return
                raise

        await self.engine.call(f"remove sandbox {ref}", rm, idempotent=True)

    async def prepare(self, images: Sequence[str]) -> PrepareReport:
        """Check which images the engine has; pull the missing ones (``pull="missing"``).

        Where no registry is reachable the report's ``missing`` says exactly which images
        are absent and why the pull failed.
        """
        return await self.engine.call(
            "prepare images",
            lambda api: prepare_images(
                api,
                list(images),
                pull=self.config.pull == "missing",
                show_progress=self.config.show_progress,
            ),
            idempotent=True,
        )

    async def derive_image(self, image: str, script: str, *, repository: str) -> str | None:
        """See :meth:`SandboxBackend.derive_image` (:mod:`patchgym_docker.derive`)."""
        from patchgym_docker.derive import derive_image

        return await derive_image(self, image, script, repository)

    async def list_derived_images(self) -> list[DerivedImage]:
        """Images ``derive_image`` made under this config's labels (:mod:`.derived_images`)."""
        from patchgym_docker.derived_images import list_derived

        return await list_derived(self)

    async def remove_derived_image(self, ref: str) -> bool:
        from patchgym_docker.derived_images import remove_derived

        return await remove_derived(self, ref)

    async def aclose(self) -> None:
        self.engine.close()
