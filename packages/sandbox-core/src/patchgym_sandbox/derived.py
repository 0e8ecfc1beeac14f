"""Derived images: what marks them patchgym's, and which of them may go.

:meth:`SandboxBackend.derive_image` keeps an image the engine made from another (a
script run once as root, committed), shared by every run that asks for the same source
and script. Such an image is a cache, not a run's leftover: it carries no run id and no
lease, but ``patchgym.managed``, the owner and the creation time (as sandboxes do) and
three labels of its own: the source reference, the source image's id and the script's
digest. :func:`stale` (``patchgym sandboxes reap --images``) picks one once it is no
longer current:

- its source reference is gone, or names another image now (re-pulled);
- a newer derivation of the same source under another script exists (the script
  changed; one source reduced under two scripts at once keeps only the newer, and the
  other is derived again when next used);
- it is older than an age the caller gives;

never one a container uses, never an image without these labels.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable

from pydantic import BaseModel

from patchgym_sandbox import labels as L

DERIVED_FROM = "patchgym.derived-from"
"""The id of the image the derivation was made from."""
DERIVED_REF = "patchgym.derived-ref"
"""The reference it was asked for (``swebench/sweb.eval...:latest``): re-pulled, it names
another id and the derivation is no longer current."""
DERIVE_SCRIPT = "patchgym.derive-script"
"""The sha256 of the script that ran."""
DERIVE_TIMEOUT_S = 1800.0
"""How long a derivation script may run (a large repository's repack takes minutes)."""


def script_digest(script: str) -> str:
    return hashlib.sha256(script.encode()).hexdigest()


def derived_labels(
    source_ref: str, source_id: str, script: str, *, now: float | None = None
) -> dict[str, str]:
    """The labels every derived image carries (a backend adds its own, e.g. its name)."""
    return {
        L.MANAGED: "true",
        L.OWNER: L.owner(),
        L.CREATED_AT: f"{time.time() if now is None else now:.3f}",  # orders rederivations
        DERIVED_REF: source_ref,
        DERIVED_FROM: source_id,
        DERIVE_SCRIPT: script_digest(script),
    }


class DerivedImage(BaseModel):
    """One derived image as the backend sees it now."""

    ref: str
    """What ``remove_derived_image`` takes (its tag, else its id)."""
    labels: dict[str, str]
    source_now: str | None
    """The id its source reference names now; None when the reference is gone."""
    in_use: bool = False
    """A container (running or not) was made from it."""

    @property
    def created_at(self) -> float:
        try:
            return float(self.labels.get(L.CREATED_AT, "0"))
        except ValueError:
            return 0.0

    @property
    def ours(self) -> bool:
        return self.labels.get(L.MANAGED) == "true" and DERIVED_FROM in self.labels


def stale(
    images: Iterable[DerivedImage], *, older_than_s: float | None = None, now: float | None = None
) -> dict[str, str]:
    """``ref -> why it may go`` for the images no longer current (see the module doc);
    images in use and images without our labels are never picked."""
    mine = [i for i in images if i.ours]
    clock = time.time() if now is None else now
    newest: dict[tuple[str, str], float] = {}
    for img in mine:
        key = (img.labels.get(DERIVED_REF, ""), img.labels[DERIVED_FROM])
        newest[key] = max(newest.get(key, 0.0), img.created_at)
    out: dict[str, str] = {}
    for img in mine:
        src, sid = img.labels.get(DERIVED_REF, ""), img.labels[DERIVED_FROM]
        if img.in_use:
            continue
        if img.source_now is None:
            why = f"its source {src or sid} is gone"
        elif img.source_now != sid:
            why = f"{src} names another image now ({img.source_now[:19]})"
        elif img.created_at < newest[(src, sid)]:
            why = f"a newer derivation of {src} (another script) replaces it"
        elif older_than_s is not None and clock - img.created_at >= older_than_s:
            why = f"older than {older_than_s:.0f}s"
        else:
            continue
        out[img.ref] = why
    return out


__all__ = [
    "DERIVED_FROM",
    "DERIVED_REF",
    "DERIVE_SCRIPT",
    "DERIVE_TIMEOUT_S",
    "DerivedImage",
    "derived_labels",
    "script_digest",
    "stale",
]
