"""``derive_image`` on docker: the labels that make a derived image patchgym's, and
``reap_derived_images``: what is no longer current goes, what a container uses or what
patchgym did not make stays.

Every image here is made by this test under a unique name (a source built ``FROM`` the
test image with a unique label) and removed by it; the backend's session label keeps the
listing to this test session's derivations (other runs share the engine).
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import docker
import docker.errors
import pytest

from patchgym_docker.backend import DockerBackend
from patchgym_docker.sandbox import BACKEND_LABEL
from patchgym_sandbox import DeriveFailed, SandboxSpec
from patchgym_sandbox import labels as L
from patchgym_sandbox.derived import DERIVE_SCRIPT, DERIVED_FROM, DERIVED_REF, script_digest

MARK = "echo derived > /pg-derived"


class Images:
    """Sources built by this test (unique names) and every image to remove at the end."""

    def __init__(self, engine: docker.DockerClient, base: str) -> None:
        self.engine = engine
        self.base = base
        self.made: list[str] = []
        self.tag = uuid.uuid4().hex[:10]

    def source(self, ref: str | None = None, *, labels: str = "") -> str:
        """A new image (new id) tagged ``ref`` (default: a unique name); returns its id."""
        ref = ref or f"local/patchgym-derive-src-{self.tag}:1"
        dockerfile = f"FROM {self.base}\nLABEL patchgym.test-source={uuid.uuid4().hex} {labels}\n"
        subprocess.run(
            ["docker", "build", "-q", "-t", ref, "-"],
            input=dockerfile,
            text=True,
            check=True,
            capture_output=True,
            env={"DOCKER_BUILDKIT": "0", "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"},
        )
        image_id = str(self.engine.images.get(ref).id)
        self.made += [image_id, ref]
        return image_id

    def remove_all(self) -> None:
        for ref in reversed(self.made):
            try:
                self.engine.images.remove(ref, force=True)
            except docker.errors.ImageNotFound:
                pass


@pytest.fixture
def images(engine: docker.DockerClient, test_image: str) -> Iterator[Images]:
    made = Images(engine, test_image)
    yield made
    made.remove_all()


@pytest.mark.asyncio
async def test_derived_image_is_labelled_and_found_again(
    backend: DockerBackend, images: Images, engine: docker.DockerClient
) -> None:
    source_id = images.source()
    ref = f"local/patchgym-derive-src-{images.tag}:1"
    name = await backend.derive_image(ref, MARK, repository=f"patchgym-clean/t-{images.tag}")
    assert name is not None
    images.made.append(name)
    labels = engine.images.get(name).labels
    assert labels[L.MANAGED] == "true" and labels[BACKEND_LABEL] == "docker"
    assert labels[DERIVED_FROM] == source_id and labels[DERIVED_REF] == ref
    assert labels[DERIVE_SCRIPT] == script_digest(MARK) and labels[L.OWNER] == L.owner()
    for key, value in backend.config.labels.items():  # the session label: listing scoped
        assert labels[key] == value
    async with backend.sandbox(SandboxSpec(image=name)) as box:
        assert (await box.exec("cat /pg-derived")).stdout.strip() == "derived"
    first = engine.images.get(name).id
    assert (
        await backend.derive_image(ref, MARK, repository=f"patchgym-clean/t-{images.tag}") == name
    )
    assert engine.images.get(name).id == first  # found by its labels, not derived again
    listed = {i.ref: i for i in await backend.list_derived_images()}
    assert name in listed and listed[name].source_now == source_id
    assert await backend.reap_derived_images() == {}  # current: stays


@pytest.mark.asyncio
async def test_a_failing_script_leaves_no_image_and_no_container(
    backend: DockerBackend, images: Images, engine: docker.DockerClient
) -> None:
    images.source()
    ref = f"local/patchgym-derive-src-{images.tag}:1"
    with pytest.raises(DeriveFailed, match=r"exit 3.*broken repository"):
        await backend.derive_image(
            ref, "echo broken repository >&2; exit 3", repository=f"patchgym-clean/t-{images.tag}"
        )
    assert await backend.list_derived_images() == []
    assert await backend.list_sandboxes() == []


@pytest.mark.asyncio
async def test_reap_takes_stale_derivations_never_one_in_use_or_not_ours(
    backend: DockerBackend, images: Images, engine: docker.DockerClient
) -> None:
    repo = f"patchgym-clean/t-{images.tag}"
    ref = f"local/patchgym-derive-src-{images.tag}:1"
    other_ref = f"local/patchgym-derive-src-{images.tag}:other"
    images.source()
    images.source(other_ref)
    derived = []
    for source, script in ((ref, MARK), (ref, MARK + " # v2"), (other_ref, MARK)):
        made = await backend.derive_image(source, script, repository=repo)
        assert made is not None
        images.made.append(made)  # removed before its source at the end
        derived.append(made)
    old_script, new_script, repulled = derived
    images.source(other_ref)  # re-pulled: the tag names a new image now
    session = " ".join(f"{k}={v}" for k, v in backend.config.labels.items())
    images.source(  # not derived by us (no patchgym.managed) though it carries the rest
        f"local/patchgym-derive-src-{images.tag}:foreign",
        labels=f"{DERIVED_FROM}=sha256:x {DERIVED_REF}={ref} {BACKEND_LABEL}=docker {session}",
    )

    picked = await backend.reap_derived_images(dry_run=True)
    assert set(picked) == {old_script, repulled}, picked
    assert "newer derivation" in picked[old_script] and "another image" in picked[repulled]
    assert engine.images.get(old_script)  # a dry run removes nothing

    async with backend.sandbox(SandboxSpec(image=old_script)) as box:  # in use: stays
        assert (await box.exec("true")).ok
        removed = await backend.reap_derived_images()
        assert set(removed) == {repulled}
        assert engine.images.get(old_script)
    assert set(await backend.reap_derived_images()) == {old_script}
    assert await backend.reap_derived_images() == {}  # the current one stays...
    assert set(await backend.reap_derived_images(older_than_s=0)) == {new_script}  # ...unless old
    with pytest.raises(docker.errors.ImageNotFound):
        engine.images.get(new_script)
    assert engine.images.get(f"local/patchgym-derive-src-{images.tag}:foreign")
