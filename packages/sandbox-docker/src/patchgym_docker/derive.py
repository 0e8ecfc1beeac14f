"""``derive_image`` on docker: run a script once in a container of an image, commit it.

The derived image is ``<repository>:<12 hex digits of the source image id>-<8 of the script's sha256>``
and carries the labels of :mod:`patchgym_sandbox.derived` (managed, owner, created,
source reference, source id, script digest) plus ``patchgym.backend=docker`` and this
config's ``labels``: the same source and script are derived once (a second call only
inspects), a re-pulled source gets a new tag, and ``reap_derived_images`` finds it
(:mod:`patchgym_docker.derived_images`). The container runs the script as root with no
network and its entrypoint off, labelled like a sandbox with a lease of the script's
deadline (a driver killed mid-derivation leaves it to ``reap --expired``); the commit
restores the source's command, entrypoint, user, working directory and environment.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import docker.errors

from patchgym_docker.sandbox import BACKEND_LABEL
from patchgym_sandbox.derived import DERIVE_TIMEOUT_S, DERIVED_FROM, derived_labels, script_digest
from patchgym_sandbox.errors import DeriveFailed, ImageNotFound
from patchgym_sandbox.spec import SandboxSpec

if TYPE_CHECKING:
    from collections.abc import Mapping

    from docker import APIClient

    from patchgym_docker.backend import DockerBackend

__all__ = ["DeriveFailed", "derive_blocking", "derive_image", "inspect_image"]


def inspect_image(api: APIClient, ref: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = api.inspect_image(ref)  # type: ignore[no-untyped-call]
    except (docker.errors.ImageNotFound, docker.errors.NotFound):
        return None
    return found


def derive_blocking(
    api: APIClient, image: str, script: str, repository: str, labels: Mapping[str, str]
) -> str:
    """Derive (or find) the image; ``labels``: the backend's, stamped on everything."""
    source = inspect_image(api, image)
    if source is None:
        raise ImageNotFound(f"cannot derive from {image}: no such image on the Docker engine")
    source_id = str(source["Id"])
    name = f"{repository}:{source_id.removeprefix('sha256:')[:12]}-{script_digest(script)[:8]}"
    have = inspect_image(api, name)
    have_labels = ((have or {}).get("Config") or {}).get("Labels") or {}
    if have_labels.get(DERIVED_FROM) == source_id and BACKEND_LABEL in have_labels:
        return name
    conf = source.get("Config") or {}
    cname = f"pg-derive-{uuid.uuid4().hex[:12]}"
    spec = SandboxSpec(lease_s=DERIVE_TIMEOUT_S + 300, labels={**labels, BACKEND_LABEL: "docker"})
    container = api.create_container(
        image,
        name=cname,
        command=["/bin/sh", "-c", script],
        entrypoint=[],
        user="0",
        network_disabled=True,
        labels={**spec.all_labels(cname), DERIVED_FROM: source_id},
    )
    cid = container["Id"]
    try:
        api.start(cid)
        code = int(api.wait(cid, timeout=int(DERIVE_TIMEOUT_S))["StatusCode"])
        if code != 0:
            tail = api.logs(cid, tail=20).decode(errors="replace").strip()
            raise DeriveFailed(f"deriving {name} from {image}: exit {code}: {tail[-800:]}")
        repo, _, tag = name.rpartition(":")
        api.commit(
            cid,
            repository=repo,
            tag=tag,
            conf={
                "Cmd": conf.get("Cmd") or ["/bin/sh"],  # never the script itself
                "Entrypoint": conf.get("Entrypoint") or None,
                "User": conf.get("User") or "",
                "WorkingDir": conf.get("WorkingDir") or "",
                "Env": conf.get("Env") or [],
                "Labels": {
                    **(conf.get("Labels") or {}),
                    **labels,
                    BACKEND_LABEL: "docker",
                    **derived_labels(image, source_id, script),
                },
            },
        )
    finally:
        api.remove_container(cid, force=True, v=True)
    return name


async def derive_image(backend: DockerBackend, image: str, script: str, repository: str) -> str:
    labels = dict(backend.config.labels)
    return await backend.engine.call(
        f"derive {repository} from {image}",
        lambda api: derive_blocking(api, image, script, repository, labels),
        idempotent=False,
    )
