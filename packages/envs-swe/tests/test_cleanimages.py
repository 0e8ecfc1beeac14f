"""Images pulled as-is: their ``.git`` reduced to the base commit once, before episodes.

The reduction script runs here on a repository holding its future (the same checks as
``test_gitclean``); on docker (skipped without an engine, failed under
``PATCHGYM_REQUIRE_ENGINES=1``) an image named like SWE-bench's (a unique name per test
session, removed at its end), whose repository has a later commit, a tag and a branch, is
derived once, up front by ``prepare_images`` (typed errors naming the image otherwise),
and its sandboxes see only the base; where a backend keeps no derived image the same
reduction runs in each sandbox at its start (``start_script``, the k8s path).
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from test_gitclean import ENV, assert_only_base, upstream

from patchgym_envs import EnvConfig, Task, bundled_task
from patchgym_envs.cleanimages import Cleaned, clean_spec, pulled_as_is, reduce_script
from patchgym_envs.errors import DatasetError, ImageCleanDataError, ImageCleanInfraError
from patchgym_envs.testing import assert_no_future, build_future_image, git_checks, holds_the_future
from patchgym_sandbox import (
    InfraError,
    SandboxBackend,
    SandboxSpec,
    available_backends,
    create_backend,
)
from patchgym_sandbox.testing import engine_missing

__all__ = ["upstream"]  # the fixture, used here

SESSION = uuid.uuid4().hex[:10]
IMAGE = f"local/sweb.eval.x86_64.patchgym-future-{SESSION}:latest"
DOCKER = {"type": "docker", "labels": {"patchgym.test-session": SESSION}, "show_progress": False}


@pytest.mark.parametrize(
    ("image", "as_is"),
    [
        ("swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest", True),
        ("xingyaoww/sweb.eval.x86_64.django__django-11099", True),
        ("sweb.eval.arm64.a:v1", True),
        ("patchgym-clean/sweb.eval.x86_64.a:0123-abcd", False),
        ("jyangballin/swesmith.x86_64.owner_1776_repo.1234abcd", False),
        ("local/csvlite:latest", False),
        (None, False),
    ],
)
def test_which_images_are_pulled_as_is(image: str | None, as_is: bool) -> None:
    assert pulled_as_is(image) is as_is


def test_container_script_reduces_to_base(upstream: tuple[Path, str, str], tmp_path: Path) -> None:
    repo, base, fix = upstream
    done = subprocess.run(
        ["sh", "-c", reduce_script(str(repo), base)], env=ENV, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == base
    assert_only_base(repo, base, fix)
    plain = tmp_path / "plain"
    plain.mkdir()
    for where in (plain, tmp_path / "absent"):  # no repository, no workdir: nothing to do
        assert subprocess.run(["sh", "-c", reduce_script(str(where), None)]).returncode == 0


async def test_backends_without_derived_images_keep_the_image(tmp_path: Path) -> None:
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "sb")})
    try:
        spec = SandboxSpec(image="swebench/sweb.eval.x86_64.a:latest", workdir="/testbed")
        assert await clean_spec(backend, spec, None) == spec
    finally:
        await backend.aclose()


def _docker(*args: str) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


@pytest.fixture(scope="module")
def built() -> Any:
    if "docker" not in available_backends():
        engine_missing("the docker backend (patchgym-sandbox-docker) is not installed")
    from patchgym_envs.bundled.docker import base_image_problem

    if (reason := base_image_problem()) is not None:
        engine_missing(reason)
    yield IMAGE, build_future_image(IMAGE)
    derived = _docker("images", "-q", "--filter", f"label=patchgym.test-session={SESSION}")
    for image_id in dict.fromkeys(derived.split()):  # this session's derivations, then the source
        _docker("image", "rm", "-f", image_id)
    _docker("image", "rm", IMAGE)


@pytest.fixture(scope="module")
def future_image(built: tuple[str, str]) -> str:
    return built[0]


@pytest.fixture(scope="module")
def base_commit(built: tuple[str, str]) -> str:
    return built[1]


async def _checks(backend: SandboxBackend, spec: SandboxSpec | str) -> dict[str, str]:
    if isinstance(spec, str):
        spec = SandboxSpec(image=spec, workdir="/testbed")
    async with backend.sandbox(spec) as sandbox:
        return await git_checks(sandbox)


def future_task(image: str, base: str, name: str = "csvlite") -> Task:
    return bundled_task(name).model_copy(update={"image": image, "base_commit": base})


async def test_pulled_image_is_derived_once_up_front_without_its_future(
    future_image: str, base_commit: str
) -> None:
    backend = create_backend(DOCKER)
    env = EnvConfig(sandbox=DOCKER)
    try:
        before = await _checks(backend, future_image)
        assert holds_the_future(before) and before["base"] == base_commit
        tasks = [future_task(future_image, base_commit, n) for n in ("csvlite", "wordwrap")]
        keys = env.images_to_clean([*tasks, bundled_task("ledger")], backend)
        assert [k.image for k in keys] == [future_image]  # one image, derived once
        seen: list[Cleaned] = []
        made = await env.prepare_images(keys, backend, on_done=seen.append)
        (derived,) = made.values()
        assert [c.derived for c in seen] == [derived] and seen[0].error is None
        assert str(derived).startswith("patchgym-clean/")
        spec = await env.aspec(tasks[1], backend, grading=True)  # the episode only looks it up
        assert spec.image == derived and spec.start_script is None
        assert_no_future(await _checks(backend, str(derived)), base_commit)
        first_id = _docker("image", "inspect", "-f", "{{.Id}}", str(derived)).strip()
        assert (
            _docker("image", "inspect", "-f", "{{json .Config.Cmd}}", str(derived)).strip()
            == '["sleep","infinity"]'
        )
    finally:
        await backend.aclose()
    again = create_backend(DOCKER)  # a new process's backend: the engine remembers
    try:
        spec2 = await clean_spec(
            again, SandboxSpec(image=future_image, workdir="/testbed"), base_commit
        )
        assert spec2.image == derived
        assert _docker("image", "inspect", "-f", "{{.Id}}", str(derived)).strip() == first_id
    finally:
        await again.aclose()


async def test_prepare_errors_name_the_image_and_say_whose_fault(
    future_image: str, base_commit: str
) -> None:
    backend = create_backend(DOCKER)
    env = EnvConfig(sandbox=DOCKER)
    missing = f"local/sweb.eval.x86_64.patchgym-missing-{SESSION}:1"
    try:
        keys = env.images_to_clean([future_task(missing, base_commit)], backend)
        with pytest.raises(ImageCleanInfraError, match=missing) as infra:
            await env.prepare_images(keys, backend)
        assert isinstance(infra.value, InfraError) and missing in infra.value.failures
        keys = env.images_to_clean([future_task(future_image, "0" * 40)], backend)
        with pytest.raises(ImageCleanDataError, match=future_image) as data:
            await env.prepare_images(keys, backend)
        assert isinstance(data.value, DatasetError) and not isinstance(data.value, InfraError)
    finally:
        await backend.aclose()


async def test_where_no_image_is_kept_each_sandbox_reduces_at_start(
    future_image: str, base_commit: str
) -> None:
    """The k8s / e2b path (their backends keep no derived image), on a docker container."""
    from patchgym_docker.backend import DockerBackend

    class KeepsNoImages(DockerBackend):
        async def derive_image(self, image: str, script: str, *, repository: str) -> str | None:
            return None

    backend = create_backend(DOCKER)
    assert isinstance(backend, DockerBackend)
    keeps_none: SandboxBackend = KeepsNoImages(backend.config)
    env = EnvConfig(sandbox=DOCKER)
    try:
        keys = env.images_to_clean([future_task(future_image, base_commit)], keeps_none)
        assert list((await env.prepare_images(keys, keeps_none)).values()) == [None]
        spec = await env.aspec(future_task(future_image, base_commit), keeps_none)
        assert spec.image == future_image and spec.start_script is not None
        assert_no_future(await _checks(keeps_none, spec), base_commit)
    finally:
        await backend.aclose()
        await keeps_none.aclose()
