"""Build the bundled tasks' Docker images without a registry.

Each image is ``FROM local/bookworm-py`` (Debian + python3 + git, built by the infra
scripts) plus the task's repository at its base commit in ``/testbed`` (the same git repo
the local backend uses as template) and a pure-Python pytest copied from this
interpreter's site-packages (no network is needed, or available, during the build).

    python -m patchgym_envs.bundled.docker            # build every bundled image
    python -m patchgym_envs.bundled.docker ledger --context-only /tmp/ctx
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from patchgym_envs.bundled import bundled_names, image_for
from patchgym_envs.bundled.template import materialise

BASE_IMAGE = "local/bookworm-py"
SITE = "/usr/local/lib/python3.11/dist-packages"
TEST_DISTS = ("pytest",)

DOCKERFILE = """\
FROM {base}
COPY site-packages/ {site}/
COPY testbed/ /testbed/
RUN ln -sf /usr/bin/python3 /usr/local/bin/python && git config --system --add safe.directory /testbed
ENV PYTHONDONTWRITEBYTECODE=1 PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
WORKDIR /testbed
"""


def _requirements(dist: metadata.Distribution) -> list[str]:
    names = []
    for req in dist.requires or []:
        name, _, marker = req.partition(";")
        if "extra" in marker:
            continue
        if marker.strip() and "python_version" in marker and '< "3.11"' in marker.replace("'", '"'):
            continue
        names.append(re.split(r"[\s<>=!~\[(]", name.strip(), maxsplit=1)[0])
    return names


def pytest_distributions(roots: tuple[str, ...] = TEST_DISTS) -> list[metadata.Distribution]:
    """pytest and what it needs at run time on Python 3.11 (pure Python), from this interpreter."""
    seen: dict[str, metadata.Distribution] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional/conditional dependency this interpreter lacks
        seen[key] = dist
        todo += _requirements(dist)
    return list(seen.values())


def build_context(name: str, dest: Path, *, base: str = BASE_IMAGE) -> Path:
    """Write the Docker build context of bundled task ``name`` into ``dest``."""
    template, _ = materialise(name)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(template, dest / "testbed", symlinks=True, dirs_exist_ok=True)
    site = dest / "site-packages"
    for dist in pytest_distributions():
        for file in dist.files or []:
            if str(file).startswith("..") or "__pycache__" in str(file):
                continue
            src = Path(str(dist.locate_file(file)))
            if src.is_file():
                target = site / str(file)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target)
    (dest / "Dockerfile").write_text(DOCKERFILE.format(base=base, site=SITE))
    return dest


def image_exists(tag: str, *, docker: str = "docker") -> bool:
    done = subprocess.run([docker, "image", "inspect", tag], capture_output=True, check=False)
    return done.returncode == 0


def base_image_problem(*, docker: str = "docker") -> str | None:
    """Why bundled images cannot be built here (no CLI, no engine, no base image), or None.

    The docker tests of several packages skip on it, or fail under PATCHGYM_REQUIRE_ENGINES=1.
    """
    if shutil.which(docker) is None:
        return f"{docker} CLI not installed"
    if not image_exists(BASE_IMAGE, docker=docker):
        return (
            f"{docker} engine not reachable or {BASE_IMAGE} missing (run ci/engines/docker-up.sh)"
        )
    return None


def build_image(
    name: str, *, docker: str = "docker", base: str = BASE_IMAGE, rebuild: bool = False
) -> str:
    """Build the image of ``name`` unless its (content-addressed) tag exists; returns the tag."""
    tag = image_for(name)
    if not rebuild and image_exists(tag, docker=docker):
        return tag
    with tempfile.TemporaryDirectory(prefix=f"patchgym-{name}-") as tmp:
        ctx = build_context(name, Path(tmp), base=base)
        done = subprocess.run(
            [docker, "build", "-q", "-t", tag, str(ctx)],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"docker build of {tag} failed: {done.stderr.strip()[-2000:]}")
    return tag


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "names", nargs="*", help=f"tasks to build (default: all of {', '.join(bundled_names())})"
    )
    parser.add_argument("--docker", default="docker", help="docker CLI to use")
    parser.add_argument("--base", default=BASE_IMAGE, help="base image (python3 + git)")
    parser.add_argument(
        "--context-only", type=Path, help="write the build context(s) here instead of building"
    )
    args = parser.parse_args(argv)
    for name in args.names or bundled_names():
        if args.context_only is not None:
            print(build_context(name, args.context_only / name, base=args.base))
        else:
            print(build_image(name, docker=args.docker, base=args.base, rebuild=args.rebuild))
    return 0


if __name__ == "__main__":
    sys.exit(main())
