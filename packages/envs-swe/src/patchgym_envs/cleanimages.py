"""No future in ``.git`` for images pulled as-is: reduced once per image, before episodes.

SWE-bench's published instance images (``swebench/sweb.eval.*``, and SWE-Gym's copies)
were built from an upstream clone: their ``.git`` may hold later commits, tags and the
fix itself. :data:`~patchgym_envs.gitclean.REDUCE_SCRIPT` runs in the task's workdir so
that only the base commit's history is left (no tags, remotes, reflogs, unreachable
objects or later packs), in one of two places:

- where the backend keeps derived images (docker: ``derive_image``), once per image into
  ``patchgym-clean/<name>:<source id>-<script hash>``, which every sandbox of the task
  (its grading sandbox too) then starts from; the engine keeps it across runs, labelled
  so ``patchgym sandboxes reap --images`` removes it once stale;
- elsewhere (k8s, e2b: no registry to keep one in), in every sandbox as its
  ``start_script``, before the sandbox is handed out: a repack of the base history per
  sandbox (seconds for a small repository, a minute or more for django-sized ones).

:func:`prepare` does every distinct image of a run up front (``patchgym validate`` /
``rollout`` call it before the first episode), a bounded number at once; the answers are
kept on the backend object, so an episode's :func:`clean_spec` only looks them up.
Images the project builds are reduced when built.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from patchgym_envs.errors import ImageCleanDataError, ImageCleanInfraError
from patchgym_envs.gitclean import REDUCE_SCRIPT
from patchgym_sandbox import DeriveFailed, InfraError, SandboxBackend, SandboxSpec

AS_IS_PREFIXES = ("sweb.eval.",)
"""Image names (last path part) published by others with a full upstream ``.git``."""
REPOSITORY = "patchgym-clean"


class CleanKey(NamedTuple):
    """One reduction: the image, the workdir holding the repository, the base commit."""

    image: str
    workdir: str
    base: str | None


class Cleaned(NamedTuple):
    """What :func:`prepare` reports per image as it finishes."""

    key: CleanKey
    derived: str | None
    """The derived image; None: reduced in each sandbox at start (``start_script``)."""
    error: str | None = None


def pulled_as_is(image: str | None) -> bool:
    """An image whose repository may hold the future (see :data:`AS_IS_PREFIXES`)."""
    if not image:
        return False
    name = image.rsplit("/", 1)[-1]
    return name.startswith(AS_IS_PREFIXES) and not image.startswith(f"{REPOSITORY}/")


def reduce_script(workdir: str, base: str | None) -> str:
    """The reduction for a container: nothing to do where the workdir holds no repository."""
    return (
        "export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_TERMINAL_PROMPT=0\n"
        f"cd {shlex.quote(workdir)} 2>/dev/null || exit 0\n"
        "git rev-parse --git-dir >/dev/null 2>&1 || exit 0\n"
        f"set -- {shlex.quote(base or 'HEAD')}\n{REDUCE_SCRIPT}"
    )


def repository_for(image: str) -> str:
    name = image.rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0].lower()
    return f"{REPOSITORY}/{name}"


def key_of(backend: SandboxBackend, spec: SandboxSpec, base: str | None) -> CleanKey | None:
    """The reduction ``spec`` needs on ``backend``; None when it starts from no image pulled
    as-is (the local backend starts from a template, reduced when it was built)."""
    image = spec.image
    if image is None or not pulled_as_is(image) or backend.provisioned_from(spec) != image:
        return None
    return CleanKey(image, spec.workdir, base)


def _done(backend: SandboxBackend) -> dict[CleanKey, str | None]:
    done: dict[CleanKey, str | None] = backend.__dict__.setdefault("_clean_images", {})
    return done


async def _derived(backend: SandboxBackend, key: CleanKey) -> str | None:
    """The derived image of ``key`` (None: the backend keeps none), derived once per backend."""
    done = _done(backend)
    if key not in done:
        locks: dict[CleanKey, asyncio.Lock] = backend.__dict__.setdefault("_clean_locks", {})
        async with locks.setdefault(key, asyncio.Lock()):
            if key not in done:
                script = reduce_script(key.workdir, key.base)
                done[key] = await backend.derive_image(
                    key.image, script, repository=repository_for(key.image)
                )
    return done[key]


async def clean_spec(backend: SandboxBackend, spec: SandboxSpec, base: str | None) -> SandboxSpec:
    """``spec`` starting from the reduced derivation of its image, or (where the backend
    keeps none) running the reduction as its ``start_script``; unchanged where no image
    pulled as-is is involved."""
    key = key_of(backend, spec, base)
    if key is None:
        return spec
    derived = await _derived(backend, key)
    if derived is None:
        return spec.model_copy(update={"start_script": reduce_script(key.workdir, key.base)})
    return spec.model_copy(update={"image": derived})


def keys_of(
    backend: SandboxBackend, jobs: Iterable[tuple[SandboxSpec, str | None]]
) -> list[CleanKey]:
    """The distinct reductions of ``(spec, base commit)`` pairs, in first-seen order."""
    keys = (key_of(backend, spec, base) for spec, base in jobs)
    return list(dict.fromkeys(k for k in keys if k is not None))


async def prepare(
    backend: SandboxBackend,
    keys: Sequence[CleanKey],
    *,
    concurrency: int,
    on_done: Callable[[Cleaned], None] | None = None,
) -> dict[CleanKey, str | None]:
    """Make every reduction of ``keys`` now, at most ``concurrency`` at once.

    Every key is tried; then failures raise, naming each image and why:
    :class:`ImageCleanInfraError` when the backend failed for any (unreachable, image
    missing, out of disk), else :class:`ImageCleanDataError` (the reduction failed inside
    the image: a broken repository, a base commit the image lacks).
    """
    sem = asyncio.Semaphore(concurrency)
    infra: dict[str, str] = {}
    data: dict[str, str] = {}
    out: dict[CleanKey, str | None] = {}

    async def one(key: CleanKey) -> None:
        error = None
        async with sem:
            try:
                out[key] = await _derived(backend, key)
            except DeriveFailed as exc:
                error = data[key.image] = str(exc)
            except InfraError as exc:
                error = infra[key.image] = f"{type(exc).__name__}: {exc}"
        if on_done is not None:
            on_done(Cleaned(key, out.get(key), error))

    async with asyncio.TaskGroup() as group:
        for key in keys:
            group.create_task(one(key))
    if infra:
        raise ImageCleanInfraError({**infra, **data})
    if data:
        raise ImageCleanDataError(data)
    return out


__all__ = [
    "AS_IS_PREFIXES",
    "CleanKey",
    "Cleaned",
    "clean_spec",
    "keys_of",
    "prepare",
    "pulled_as_is",
    "reduce_script",
]
