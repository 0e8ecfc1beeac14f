"""Pre-pull images on every node with a short-lived DaemonSet (opt-in: ``prepull: true``).

Each image becomes an init container that runs ``sh -c true`` (it only has to be pulled);
the main container is a pause image. Once every scheduled pod is ready the images are on
every node; an init container stuck on an image error names the missing image.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from patchgym_k8s.client import Api
from patchgym_k8s.readiness import IMAGE_ERRORS
from patchgym_sandbox import labels as L
from patchgym_sandbox.backend import PrepareReport
from patchgym_sandbox.errors import InfraError

PREPULL_LABEL = "patchgym.prepull"
"""On a pre-pull DaemonSet and its pods: the DaemonSet's name (``reap`` selects on it)."""
GONE_TIMEOUT_S = 120.0
"""How long a finished pre-pull waits for its DaemonSet (and its pods) to be deleted."""


def daemon_set(api: Api, name: str, images: list[str]) -> dict[str, Any]:
    """The DaemonSet, labelled like a sandbox (managed, owner, created, lease): its lease
    covers the longest a pre-pull can take, so ``reap`` removes one a crashed driver left."""
    cfg = api.cfg
    lease_s = cfg.prepull_timeout_s + GONE_TIMEOUT_S + 60
    pod_labels = {L.MANAGED: "true", PREPULL_LABEL: name}
    labels = {
        **cfg.labels,
        **pod_labels,
        L.OWNER: L.owner(),
        L.CREATED_AT: str(int(time.time())),
        L.EXPIRES_AT: str(L.expires_at(lease_s)),
    }
    pod_spec: dict[str, Any] = {
        "initContainers": [
            {
                "name": f"img-{i}",
                "image": image,
                "imagePullPolicy": cfg.image_pull_policy,
                "command": ["sh", "-c", "true"],
            }
            for i, image in enumerate(images)
        ],
        "containers": [
            {
                "name": "pause",
                "image": cfg.prepull_pause_image,
                "imagePullPolicy": cfg.image_pull_policy,
            }
        ],
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 0,
    }
    for key, value in (
        ("nodeSelector", cfg.node_selector or None),
        ("tolerations", cfg.tolerations or None),
        ("imagePullSecrets", [{"name": s} for s in cfg.image_pull_secrets] or None),
        ("runtimeClassName", cfg.runtime_class),
        ("hostNetwork", True if cfg.host_network else None),
    ):
        if value is not None:
            pod_spec[key] = value
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {PREPULL_LABEL: name}},
            "template": {"metadata": {"labels": pod_labels}, "spec": pod_spec},
        },
    }


def _image_failures(api: Api, name: str, images: list[str]) -> dict[str, str]:
    failures: dict[str, str] = {}
    for pod in api.list_pods(f"{PREPULL_LABEL}={name}"):
        for cs in (pod.get("status") or {}).get("initContainerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in IMAGE_ERRORS:
                idx = int(str(cs.get("name", "img-0")).split("-")[-1])
                failures[images[idx]] = (
                    f"{waiting.get('reason')}: {waiting.get('message', '')}".strip()
                )
    return failures


def prepull(api: Api, images: list[str]) -> PrepareReport:
    """Run the DaemonSet until all nodes have the images (or one fails / time runs out)."""
    name = "patchgym-prepull-" + uuid.uuid4().hex[:8]
    api.create_daemon_set(daemon_set(api, name, images))
    deadline = time.monotonic() + api.cfg.prepull_timeout_s
    try:
        while True:
            ds = api.read_daemon_set(name)
            st = ds.get("status") or {}
            desired, ready = st.get("desiredNumberScheduled"), st.get("numberReady", 0)
            if desired is not None and desired > 0 and ready >= desired:
                return PrepareReport(pulled=list(images))
            failures = _image_failures(api, name, images)
            if failures:
                return PrepareReport(
                    pulled=[i for i in images if i not in failures], missing=failures
                )
            if time.monotonic() > deadline:
                why = f"not on every node after {api.cfg.prepull_timeout_s:.0f}s ({ready}/{desired} ready)"
                return PrepareReport(missing=dict.fromkeys(images, why))
            time.sleep(1.0)
    finally:
        remove_daemon_set(api, name, GONE_TIMEOUT_S)


def remove_daemon_set(api: Api, name: str, timeout_s: float) -> None:
    """Delete the DaemonSet (its pods first: foreground propagation) and watch until it is
    gone; :class:`InfraError` naming it when it is still there after ``timeout_s``."""
    api.delete_daemon_set(name)
    deadline = time.monotonic() + timeout_s
    while True:
        current = api.read_daemon_set_or_none(name)
        if current is None:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise InfraError(
                f"pre-pull DaemonSet {name} still exists {timeout_s:.0f} s after its deletion "
                "(pods stuck terminating?); `patchgym sandboxes reap` removes it later"
            )
        version = current["metadata"].get("resourceVersion")
        for kind, _ in api.watch_daemon_set(name, version, remaining):
            if kind in ("DELETED", "ERROR"):
                break


def leftover_daemon_sets(
    api: Api, selector: Mapping[str, str] | None, *, expired: bool
) -> list[str]:
    """Names of our pre-pull DaemonSets that ``reap`` with these arguments removes."""
    return [
        str(ds["metadata"]["name"])
        for ds in api.list_daemon_sets(f"{L.MANAGED}=true,{PREPULL_LABEL}")
        if L.should_reap(ds["metadata"].get("labels") or {}, selector, expired=expired)
    ]
