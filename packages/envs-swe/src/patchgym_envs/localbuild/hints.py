"""What to tell a user whose rows cannot start on the chosen backend: build them first.

Raw SWE-bench rows name a published image (``swebench/sweb.eval.*``) and no template: the
local backend has nothing to start from, and Docker here has no registry to pull from.
``patchgym datasets build-local`` turns them into something each backend can run.
"""

from __future__ import annotations

from collections.abc import Sequence

from patchgym_envs.sandboxes import spec_for
from patchgym_envs.task import Task
from patchgym_sandbox import SandboxBackend


def build_command(backend: str) -> str:
    target = " --for docker" if backend in ("docker", "k8s") else ""
    return (
        f"patchgym datasets build-local dataset=<this dataset>{target} --out DIR, "
        "then dataset=file dataset.path=DIR/tasks.jsonl"
    )


def unprovisioned(tasks: Sequence[Task], backend: SandboxBackend) -> list[Task]:
    """Tasks that name nothing ``backend`` can start a sandbox from."""
    return [t for t in tasks if not backend.provisioned_from(spec_for(t, backend))]


def not_runnable(tasks: Sequence[Task], backend: SandboxBackend) -> str | None:
    """One line saying which tasks cannot start on ``backend`` and the command that fixes it."""
    missing = unprovisioned(tasks, backend)
    if not missing:
        return None
    first = missing[0]
    return (
        f"{len(missing)} of {len(tasks)} tasks have nothing the {backend.name} backend can start "
        f"from (first: {first.id}, image {first.image or 'none'}, no template); build them "
        f"first: {build_command(backend.name)}"
    )


def missing_image_hint(infra_error: str, backend: str) -> str:
    """An infra error, with the build command when it is a missing image."""
    if "image not found" in infra_error or "ImageNotFound" in infra_error:
        return f"{infra_error} — build the rows' images: {build_command(backend)}"
    return infra_error
