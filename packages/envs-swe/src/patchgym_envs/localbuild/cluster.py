"""Load offline row images into a Kubernetes node's image store (``build-local --for k8s``).

A row image is built into the local Docker engine (:mod:`patchgym_envs.localbuild.images`).
A kubelet that runs pods on that same engine (dockershim, as the project's single-node
cluster does) sees it already: nothing to load. A kubelet on containerd keeps images in
containerd's ``k8s.io`` namespace: ``docker save IMAGE | ctr -n k8s.io images import -``
puts it there, and pods with ``image_pull_policy: IfNotPresent`` (the k8s backend's
default) or ``Never`` run it without a registry.
"""

from __future__ import annotations

import subprocess
from typing import Literal

from patchgym_envs.localbuild.errors import BuildFailed

NodeRuntime = Literal["docker", "containerd"]
K8S_NAMESPACE = "k8s.io"


def load_pipeline(
    image: str, runtime: NodeRuntime, *, address: str | None = None
) -> tuple[list[str], list[str]] | None:
    """The ``(save, import)`` commands that load ``image`` into the node's runtime, piped
    one into the other; None when the node's runtime is the Docker engine that holds it."""
    if runtime == "docker":
        return None
    ctr = ["ctr", *(["--address", address] if address else []), "-n", K8S_NAMESPACE]
    return ["docker", "save", image], [*ctr, "images", "import", "-"]


def load_image(image: str, runtime: NodeRuntime, *, address: str | None = None) -> None:
    """Run :func:`load_pipeline` (nothing for ``docker``); a failure is a :class:`BuildFailed`
    naming the command."""
    pipeline = load_pipeline(image, runtime, address=address)
    if pipeline is None:
        return
    save_cmd, import_cmd = pipeline
    try:
        save = subprocess.Popen(save_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert save.stdout is not None
        imported = subprocess.run(import_cmd, stdin=save.stdout, capture_output=True, text=True)
        save.stdout.close()
        save_err = save.communicate()[1].decode(errors="replace")
    except FileNotFoundError as exc:
        raise BuildFailed(
            f"loading {image} into the cluster needs {exc.filename!r} on PATH"
        ) from None
    if save.returncode != 0 or imported.returncode != 0:
        why = (save_err or imported.stderr).strip()[-400:]
        raise BuildFailed(f"{' '.join(save_cmd)} | {' '.join(import_cmd)} failed: {why}")
