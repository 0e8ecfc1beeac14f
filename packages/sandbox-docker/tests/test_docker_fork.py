"""``Sandbox.fork`` on docker: the committed image, who removes it, and reap after a crash.
What every backend shares is in the conformance suite (``ForkConformance``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import docker
import pytest

from patchgym_docker.backend import DockerBackend
from patchgym_docker.fork import REPOSITORY
from patchgym_sandbox import SandboxError, SandboxSpec, create_backend
from patchgym_sandbox import labels as L
from patchgym_sandbox.sandbox import Sandbox


def fork_images(engine: docker.DockerClient, parent: Sandbox) -> list[str]:
    found = engine.images.list(REPOSITORY, filters={"label": f"{L.FORK_OF}={parent.id}"})
    return [t for img in found for t in img.tags]


async def prepared(backend: DockerBackend, image: str, run: str) -> Sandbox:
    parent = await backend.sandbox(SandboxSpec(image=image, run_id=run)).start()
    setup = "echo tool > /usr/local/bin/pg-tool && echo cfg > /etc/pg.cfg && echo w > built.txt"
    assert (await parent.exec(setup)).ok
    return parent


@pytest.mark.asyncio
async def test_children_share_one_image_that_the_last_one_removes(
    backend: DockerBackend, test_image: str, engine: docker.DockerClient
) -> None:
    parent = await prepared(backend, test_image, f"fork-{uuid.uuid4().hex[:8]}")
    try:
        kids = await parent.fork(3)
        (image,) = fork_images(engine, parent)
        for kid in kids:
            out = await kid.exec("cat /usr/local/bin/pg-tool /etc/pg.cfg built.txt")
            assert out.stdout == "tool\ncfg\nw\n", out
        # a child writing where the snapshot's files live changes only its own layer
        await kids[0].exec("echo evil > /usr/local/bin/pg-tool; rm /etc/pg.cfg built.txt")
        assert (
            await kids[1].exec("cat /usr/local/bin/pg-tool /etc/pg.cfg")
        ).stdout == "tool\ncfg\n"
        fresh = engine.containers.run(image, ["cat", "/usr/local/bin/pg-tool"], remove=True)
        assert fresh == b"tool\n"
        await kids[0].close()
        await kids[1].close()
        assert fork_images(engine, parent) == [image]  # still used by the third child
        await kids[2].close()
        assert fork_images(engine, parent) == []
    finally:
        await parent.close()


@pytest.mark.asyncio
async def test_reap_after_a_crashed_driver_removes_children_and_image(
    backend: DockerBackend,
    test_image: str,
    engine: docker.DockerClient,
    docker_config: Callable[..., dict[str, Any]],
) -> None:
    run = f"fork-reap-{uuid.uuid4().hex[:8]}"
    parent = await prepared(backend, test_image, run)
    await parent.fork(2)  # never closed: the driver "crashed"
    assert len(fork_images(engine, parent)) == 1
    other = create_backend(docker_config())
    try:
        removed = await other.reap({L.RUN_ID: run})
    finally:
        await other.aclose()
    assert len(removed) == 3
    assert fork_images(engine, parent) == []


@pytest.mark.asyncio
async def test_fork_of_a_lost_parent_raises_and_leaves_no_image(
    backend: DockerBackend, test_image: str, engine: docker.DockerClient
) -> None:
    parent = await backend.sandbox(SandboxSpec(image=test_image)).start()
    engine.containers.get(parent.id).remove(force=True)
    with pytest.raises(SandboxError):
        await parent.fork(2)
    assert fork_images(engine, parent) == []
    await parent.close()
