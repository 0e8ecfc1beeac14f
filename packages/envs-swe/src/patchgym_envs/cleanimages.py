"""No future in ``.git`` for images pulled as-is: reduced once per image, before episodes.

SWE-bench's published instance images (``swebench/sweb.eval.*``, and SWE-Gym's copies)
were built from an upstream clone: their ``.git`` may hold later commits, tags and the
fix itself. Where the backend keeps derived images (docker: ``derive_image``), an
episode's sandbox (and its grading sandbox) starts from a derivation of such an image in
which :data:`~patchgym_envs.gitclean.REDUCE_SCRIPT` ran in the task's workdir: only the
base commit's history, no tags, remotes, reflogs, unreachable objects or later packs.
The engine keeps it (``patchgym-clean/<name>:<source id>-<script hash>``), so each image
is derived once; a process remembers the answer per backend. Images the project builds
are reduced when built; a backend that cannot derive (k8s, e2b) uses the image unchanged.
"""

from __future__ import annotations

import asyncio
import shlex

from patchgym_envs.gitclean import REDUCE_SCRIPT
from patchgym_sandbox import SandboxBackend, SandboxSpec

AS_IS_PREFIXES = ("sweb.eval.",)
"""Image names (last path part) published by others with a full upstream ``.git``."""
REPOSITORY = "patchgym-clean"


def pulled_as_is(image: str | None) -> bool:
    """An image whose repository may hold the future (see :data:`AS_IS_PREFIXES`)."""
    if not image:
        return False
    name = image.rsplit("/", 1)[-1]
    return name.startswith(AS_IS_PREFIXES) and not image.startswith(f"{REPOSITORY}/")


def reduce_script(workdir: str, base: str | None) -> str:
    """The reduction for a container: nothing to do where the workdir holds no repository."""
    return (
        f"cd {shlex.quote(workdir)} 2>/dev/null || exit 0\n"
        "git rev-parse --git-dir >/dev/null 2>&1 || exit 0\n"
        f"set -- {shlex.quote(base or 'HEAD')}\n{REDUCE_SCRIPT}"
    )


def repository_for(image: str) -> str:
    name = image.rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0].lower()
    return f"{REPOSITORY}/{name}"


async def clean_spec(backend: SandboxBackend, spec: SandboxSpec, base: str | None) -> SandboxSpec:
    """``spec`` with its image replaced by the reduced derivation, where one applies."""
    image = spec.image
    if image is None or not pulled_as_is(image):
        return spec
    key = (image, spec.workdir, base)
    done: dict[tuple[str, str, str | None], str] = backend.__dict__.setdefault("_clean_images", {})
    locks: dict[tuple[str, str, str | None], asyncio.Lock] = backend.__dict__.setdefault(
        "_clean_image_locks", {}
    )
    if key not in done:
        async with locks.setdefault(key, asyncio.Lock()):
            if key not in done:
                script = reduce_script(spec.workdir, base)
                derived = await backend.derive_image(
                    image, script, repository=repository_for(image)
                )
                done[key] = derived or image
    return spec if done[key] == image else spec.model_copy(update={"image": done[key]})


__all__ = ["AS_IS_PREFIXES", "clean_spec", "pulled_as_is", "reduce_script"]
