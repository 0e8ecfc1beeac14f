"""Images pulled as-is: their ``.git`` reduced to the base commit once, before episodes.

The reduction script runs here on a repository holding its future (the same checks as
``test_gitclean``); on docker (skipped without an engine, failed under
``PATCHGYM_REQUIRE_ENGINES=1``) an image named like SWE-bench's, whose repository has a
later commit, a tag and a branch, is derived once and its sandboxes see only the base.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_gitclean import ENV, assert_only_base, upstream

from patchgym_envs import EnvConfig, bundled_task
from patchgym_envs.cleanimages import clean_spec, pulled_as_is, reduce_script
from patchgym_sandbox import SandboxSpec, available_backends, create_backend
from patchgym_sandbox.testing import engine_missing

__all__ = ["upstream"]  # the fixture, used here

IMAGE = "local/sweb.eval.x86_64.patchgym-future:latest"


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


DOCKERFILE = """FROM local/bookworm-py
RUN set -e; mkdir -p /testbed; cd /testbed; export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t \\
  GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t; git init -q -b main . \\
 && printf 'def add(a, b):\\n    return a - b\\n' > lib.py && git add -A && git commit -qm base \\
 && git tag v1 && printf 'def add(a, b):\\n    return a + b  # THE FIX\\n' > lib.py \\
 && git commit -qam 'THE FIX' && git tag -a v2 -m fixed && git branch later \\
 && git update-ref refs/remotes/origin/main HEAD && git gc -q && git reset -q --hard v1
WORKDIR /testbed
CMD ["sleep", "infinity"]
"""


def _docker(*args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["docker", *args], input=stdin, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


@pytest.fixture(scope="module")
def future_image() -> Any:
    if "docker" not in available_backends():
        engine_missing("the docker backend (patchgym-sandbox-docker) is not installed")
    from patchgym_envs.bundled.docker import base_image_problem

    if (reason := base_image_problem()) is not None:
        engine_missing(reason)
    subprocess.run(
        ["docker", "build", "--network", "none", "-q", "-t", IMAGE, "-"],
        input=DOCKERFILE,
        text=True,
        check=True,
        capture_output=True,
        env={**ENV, "DOCKER_BUILDKIT": "0"},
    )
    return IMAGE


async def _checks(backend: Any, image: str) -> dict[str, str]:
    sandbox = backend.sandbox(SandboxSpec(image=image, workdir="/testbed"))
    await sandbox.start()
    try:
        out = {}
        for name, cmd in {
            "base": "git rev-parse v1 2>/dev/null || git rev-parse HEAD",
            "log": "git log --all --format=%H",
            "objects": "git rev-list --all --objects | cut -d' ' -f1 | sort",
            "reachable": "git rev-list --objects HEAD | cut -d' ' -f1 | sort",
            "stored": "git cat-file --batch-all-objects --batch-check | cut -d' ' -f1 | sort",
            "unreachable": "git fsck --unreachable --no-reflogs 2>&1",
            "refs": "git for-each-ref --format='%(refname)'",
            "grep": "git log --all --grep 'THE FIX' --format=%H; git log --all -p | grep -c 'THE FIX'",
            "lib": "cat lib.py",
        }.items():
            res = await sandbox.exec(cmd, timeout=60)
            out[name] = res.stdout.strip()
        return out
    finally:
        await sandbox.close()


async def test_pulled_image_is_derived_once_without_its_future(future_image: str) -> None:
    backend = create_backend({"type": "docker"})
    derived: list[str] = []
    try:
        before = await _checks(backend, future_image)
        assert before["grep"].splitlines()[-1] != "0" and "refs/tags/v2" in before["refs"]
        base = before["base"]
        spec = await EnvConfig(sandbox={"type": "docker"}).aspec(
            bundled_task("csvlite").model_copy(update={"image": future_image, "base_commit": base}),
            backend,
        )
        derived.append(str(spec.image))
        assert spec.image != future_image and str(spec.image).startswith("patchgym-clean/")
        after = await _checks(backend, str(spec.image))
        assert after["log"] == base, after
        assert after["objects"] == after["reachable"] == after["stored"], after
        assert after["unreachable"] == "" and after["refs"] == "refs/heads/main", after
        assert after["grep"] == "0" and after["lib"].endswith("a - b"), after
        first_id = _docker("image", "inspect", "-f", "{{.Id}}", str(spec.image)).strip()
        assert (
            _docker("image", "inspect", "-f", "{{json .Config.Cmd}}", str(spec.image)).strip()
            == '["sleep","infinity"]'
        )
    finally:
        await backend.aclose()
    again = create_backend({"type": "docker"})  # a new process's backend: the engine remembers
    try:
        spec2 = await clean_spec(again, SandboxSpec(image=future_image, workdir="/testbed"), base)
        assert spec2.image == derived[0]
        assert _docker("image", "inspect", "-f", "{{.Id}}", derived[0]).strip() == first_id
    finally:
        await again.aclose()
        await asyncio.to_thread(_docker, "image", "rm", derived[0])
