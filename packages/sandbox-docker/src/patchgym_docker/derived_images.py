"""The derived images of this backend (:mod:`patchgym_docker.derive`): listed, removed.

Found by label only: ``patchgym.managed``, ``patchgym.backend=docker``, this config's
``labels`` and ``patchgym.derived-from``; an image without them is never listed. A
removal is never forced: the engine refuses while a container (running or stopped) was
made from the image, and the image stays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import docker.errors

from patchgym_docker.derive import inspect_image
from patchgym_docker.engine import status_of
from patchgym_docker.sandbox import BACKEND_LABEL
from patchgym_sandbox import labels as L
from patchgym_sandbox.derived import DERIVED_FROM, DERIVED_REF, DerivedImage

if TYPE_CHECKING:
    from docker import APIClient

    from patchgym_docker.backend import DockerBackend


def list_blocking(api: APIClient, labels: dict[str, str]) -> list[DerivedImage]:
    wanted = {L.MANAGED: "true", BACKEND_LABEL: "docker", **labels}
    filters = [f"{k}={v}" for k, v in wanted.items()] + [DERIVED_FROM]
    images: list[dict[str, Any]] = list(api.images(filters={"label": filters}))
    used = {str(c.get("ImageID")) for c in api.containers(all=True)}
    out: list[DerivedImage] = []
    for img in images:
        tags = {str(k): str(v) for k, v in (img.get("Labels") or {}).items()}
        source = tags.get(DERIVED_REF)
        now = inspect_image(api, source) if source else None
        ref = [t for t in img.get("RepoTags") or [] if t != "<none>:<none>"]
        out.append(
            DerivedImage(
                ref=ref[0] if ref else str(img["Id"]),
                labels=tags,
                source_now=str(now["Id"]) if now is not None else None,
                in_use=str(img["Id"]) in used,
            )
        )
    return out


def remove_blocking(api: APIClient, ref: str) -> bool:
    try:
        api.remove_image(ref)
    except docker.errors.NotFound:
        return True
    except docker.errors.APIError as exc:
        if status_of(exc) == 409:  # a container uses it (or an image was built on it)
            return False
        raise
    return True


async def list_derived(backend: DockerBackend) -> list[DerivedImage]:
    labels = dict(backend.config.labels)
    return await backend.engine.call(
        "list derived images", lambda api: list_blocking(api, labels), idempotent=True
    )


async def remove_derived(backend: DockerBackend, ref: str) -> bool:
    return await backend.engine.call(
        f"remove derived image {ref}", lambda api: remove_blocking(api, ref), idempotent=True
    )
