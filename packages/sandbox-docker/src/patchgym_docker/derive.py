"""``derive_image`` on docker: run a script once in a container of an image, commit it.

The derived image is ``<repository>:<12 hex digits of the source image id>-<8 of the script's sha256>`` and
carries the label ``patchgym.derived-from`` = the source id: the same source is derived
once (a second call only inspects), a re-pulled source gets a new tag. The container runs
the script as root with no network and its entrypoint off; the commit restores the
source's command, entrypoint, user, working directory and environment.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import docker.errors

from patchgym_sandbox.errors import InfraError

if TYPE_CHECKING:
    from docker import APIClient

    from patchgym_docker.backend import DockerBackend

DERIVED_FROM = "patchgym.derived-from"
WAIT_S = 1800


class DeriveFailed(InfraError):
    """The script exited non-zero in the source image (its output tail is in the message):
    the image, not the policy, is at fault."""


def _inspect(api: APIClient, ref: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = api.inspect_image(ref)  # type: ignore[no-untyped-call]
    except (docker.errors.ImageNotFound, docker.errors.NotFound):
        return None
    return found


def derive_blocking(api: APIClient, image: str, script: str, repository: str) -> str:
    source = _inspect(api, image)
    if source is None:
        raise docker.errors.ImageNotFound(f"no such image: {image}")
    source_id = str(source["Id"])
    digest = hashlib.sha256(script.encode()).hexdigest()[:8]
    name = f"{repository}:{source_id.removeprefix('sha256:')[:12]}-{digest}"
    have = _inspect(api, name)
    if have is not None and (have["Config"].get("Labels") or {}).get(DERIVED_FROM) == source_id:
        return name
    conf = source.get("Config") or {}
    container = api.create_container(
        image,
        command=["/bin/sh", "-c", script],
        entrypoint=[],
        user="0",
        network_disabled=True,
        labels={DERIVED_FROM: source_id},
    )
    cid = container["Id"]
    try:
        api.start(cid)
        code = int(api.wait(cid, timeout=WAIT_S)["StatusCode"])
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
                "Labels": {**(conf.get("Labels") or {}), DERIVED_FROM: source_id},
            },
        )
    finally:
        api.remove_container(cid, force=True, v=True)
    return name


async def derive_image(backend: DockerBackend, image: str, script: str, repository: str) -> str:
    return await backend.engine.call(
        f"derive {repository} from {image}",
        lambda api: derive_blocking(api, image, script, repository),
        idempotent=False,
    )
