"""``Sandbox.fork`` on docker: the parent container committed to an image its children run.

``docker commit`` pauses the parent while it copies its writable layer (the cgroup
freezer), so the snapshot is consistent; the whole container filesystem is carried
(/usr/local, /tmp, the workdir), never processes or anonymous volumes. The image carries
patchgym's labels (managed, run id, owner, lease, ``patchgym.fork-of``) so ``reap`` finds it.

The engine counts the image's users: each child tries to remove it after its container
is gone, and only the last one succeeds (the others get "in use"). ``reap`` removes fork
images that its selector or their lease picks, and those that no container uses after
:data:`ORPHAN_AFTER_S` (a driver killed between the commit and the children's creation).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import docker.errors

from patchgym_docker.engine import status_of
from patchgym_docker.sandbox import DockerSandbox
from patchgym_sandbox import labels as L
from patchgym_sandbox.pool import start_all
from patchgym_sandbox.sandbox import Sandbox
from patchgym_sandbox.spec import SandboxSpec

if TYPE_CHECKING:
    from docker import APIClient

    from patchgym_docker.backend import DockerBackend

REPOSITORY = "patchgym-fork"
ORPHAN_AFTER_S = 600.0
"""A fork image no container uses is an orphan once this old (a fork takes seconds)."""


async def fork_container(
    backend: DockerBackend, parent: DockerSandbox, spec: SandboxSpec, n: int
) -> list[Sandbox]:
    """``n`` started children of ``spec`` running a commit of ``parent``; all or none."""
    children = [backend.sandbox(spec) for _ in range(n)]
    docker_children = [c for c in children if isinstance(c, DockerSandbox)]
    image = f"{REPOSITORY}:{parent.id}-{uuid.uuid4().hex[:8]}"
    repo, tag = image.split(":")
    labels = image_labels(docker_children[0].labels(), parent.id)
    cid = parent.container_id

    def commit(api: APIClient) -> None:
        api.commit(cid, repository=repo, tag=tag, conf={"Labels": labels}, pause=True)

    await backend.engine.call(f"commit {parent.id} to {image}", commit, idempotent=False)
    for child in docker_children:
        child.fork_image = image
    try:
        return await start_all(children)
    except BaseException:
        await remove_image(backend, image)
        raise


def image_labels(child_labels: Mapping[str, str], parent_id: str) -> dict[str, str]:
    """A child's labels less the ones naming one sandbox (the engine merges the parent's
    own over them): run id, owner, lease, backend, session labels, and fork-of."""
    per_sandbox = {L.SANDBOX_ID, L.ROLLOUT_ID}
    return {k: v for k, v in child_labels.items() if k not in per_sandbox} | {L.FORK_OF: parent_id}


async def remove_image(backend: DockerBackend, image: str) -> bool:
    """Remove a fork image unless a container still uses it; False when it stays."""

    def rm(api: APIClient) -> bool:
        try:
            api.remove_image(image)
        except docker.errors.NotFound:
            return True
        except docker.errors.APIError as exc:
            if status_of(exc) == 409:  # still in use by a container: its last user removes it
                return False
            raise
        return True

    return await backend.engine.call(f"remove fork image {image}", rm, idempotent=True)


async def reap_images(
    backend: DockerBackend, selector: Mapping[str, str] | None, *, expired: bool
) -> list[str]:
    """Remove fork images picked by ``selector`` or their lease, or orphaned; their refs."""
    wanted = {L.MANAGED: "true", **backend.config.labels}
    filters = [f"{k}={v}" for k, v in wanted.items()] + [L.FORK_OF]

    def query(api: APIClient) -> list[dict[str, Any]]:
        return list(api.images(filters={"label": filters}))

    removed: list[str] = []
    for img in await backend.engine.call("list fork images", query, idempotent=True):
        tags = img.get("Labels") or {}
        orphan = time.time() - float(img.get("Created", 0)) > ORPHAN_AFTER_S
        if not (L.should_reap(tags, selector, expired=expired) or orphan):
            continue
        ref = (img.get("RepoTags") or [img["Id"]])[0]
        if await remove_image(backend, ref):
            removed.append(ref)
    return removed
