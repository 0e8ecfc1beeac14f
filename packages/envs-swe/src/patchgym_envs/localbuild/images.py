"""Offline Docker images of locally built rows (``build-local --for docker``).

The same template and environment the local backend runs become two images, built with
plain ``docker build`` (no BuildKit, no registry, no network):

- one **environment image** per environment key, ``FROM local/bookworm-py`` (the base
  image the infra scripts build): the interpreter's installation (its standard library,
  without its own site-packages) and the uv environment, each at the absolute path it has
  on the build machine, so the environment's links and editable installs hold unchanged;
- one **row image** per task, ``FROM`` its environment image, adding only the template
  (the repository at ``base_commit``) in ``/testbed``.

N rows of one environment thus share every layer but the last. Tags are content
addressed: a rebuild happens only when the environment or the template changes.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from patchgym_envs.localbuild.envs import EnvInfo
from patchgym_envs.localbuild.errors import BuildFailed
from patchgym_envs.task import Task

BASE_IMAGE = "local/bookworm-py"
ENV_REPO = "patchgym-swe-env"
ROW_REPO = "patchgym-swe"
SKIP_DIRS = {"site-packages", "test", "tests", "idlelib", "tkinter", "turtledemo", "ensurepip"}

ENV_DOCKERFILE = """\
FROM {base}
COPY python/ {prefix}/
COPY env/ {env}/
ENV PYTHONDONTWRITEBYTECODE=1
"""
ROW_DOCKERFILE = """\
FROM {env_image}
LABEL patchgym.env-image={env_image}
COPY testbed/ {workdir}/
RUN git config --system --add safe.directory {workdir}
WORKDIR {workdir}
"""


def _link_tree(src: Path, dest: Path, *, skip: set[str] | None = None) -> None:
    """Copy ``src`` to ``dest`` by hard links where possible (same file system), symlinks kept."""

    def link(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)

    def ignore(folder: str, names: list[str]) -> list[str]:
        inside_lib = re.search(r"/lib/python\d+\.\d+$", folder) is not None
        return [n for n in names if skip and inside_lib and n in skip]

    shutil.copytree(src, dest, symlinks=True, copy_function=link, ignore=ignore)


def _tree_digest(path: Path) -> str:
    """A cheap content address of a folder: names, sizes and mtimes (git objects for repos)."""
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for name in sorted(files):
            p = os.path.join(root, name)
            st = os.lstat(p)
            h.update(f"{os.path.relpath(p, path)}:{st.st_size}:{int(st.st_mtime)}\n".encode())
    return h.hexdigest()[:12]


def image_exists(tag: str) -> bool:
    done = subprocess.run(["docker", "image", "inspect", tag], capture_output=True, check=False)
    return done.returncode == 0


def docker_build(tag: str, context: Path) -> None:
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}
    done = subprocess.run(
        ["docker", "build", "-q", "--network", "none", "-t", tag, str(context)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise BuildFailed(f"docker build of {tag} failed: {done.stderr.strip()[-600:]}")


def env_image(env: EnvInfo, *, base: str = BASE_IMAGE, scratch: Path | None = None) -> str:
    """The environment's image (built unless its tag exists); returns the tag."""
    record = hashlib.sha256(env.model_dump_json().encode()).hexdigest()[:8]
    tag = f"{ENV_REPO}:{env.key}-{record}"  # the env's path and build are part of the image
    if image_exists(tag):
        return tag
    with tempfile.TemporaryDirectory(prefix="pg-envimg-", dir=scratch) as tmp:
        ctx = Path(tmp)
        _link_tree(Path(env.base_prefix), ctx / "python", skip=SKIP_DIRS)
        _link_tree(Path(env.path), ctx / "env")
        dockerfile = ENV_DOCKERFILE.format(base=base, prefix=env.base_prefix, env=env.path)
        (ctx / "Dockerfile").write_text(dockerfile)
        docker_build(tag, ctx)
    return tag


def row_tag(task: Task, env_tag: str) -> str:
    assert task.template is not None
    digest = hashlib.sha256(
        f"{env_tag}\n{task.workdir}\n{_tree_digest(Path(task.template))}".encode()
    ).hexdigest()[:12]
    name = re.sub(r"[^a-z0-9_.-]+", "-", task.id.lower()).strip("-.")[:100] or "row"
    return f"{ROW_REPO}:{name}-{digest}"


def row_image(task: Task, env_tag: str, *, scratch: Path | None = None) -> str:
    """The row's image ``FROM`` its environment image, with the template in the workdir."""
    if task.template is None:
        raise BuildFailed(f"task {task.id} has no template to put in an image")
    tag = row_tag(task, env_tag)
    if image_exists(tag):
        return tag
    with tempfile.TemporaryDirectory(prefix="pg-rowimg-", dir=scratch) as tmp:
        ctx = Path(tmp)
        _link_tree(Path(task.template), ctx / "testbed")
        (ctx / "Dockerfile").write_text(
            ROW_DOCKERFILE.format(env_image=env_tag, workdir=task.workdir)
        )
        docker_build(tag, ctx)
    return tag


def for_docker(task: Task, env: EnvInfo, *, scratch: Path | None = None) -> Task:
    """The task with its offline image set (the template stays, for the local backend)."""
    tag = row_image(task, env_image(env, scratch=scratch), scratch=scratch)
    return task.model_copy(update={"image": tag})
