"""Labels and leases: how leftovers are found and reaped on every backend.

Every sandbox carries ``patchgym.managed``, its id, a run id (the caller's, else one per
process: :func:`default_run_id`), a rollout id (the caller's, else the sandbox id), the
owner (user and host that made it), its creation time and a lease expiry. A lease is
short (:data:`DEFAULT_LEASE_S`, minutes) and renewed while the sandbox is in use, so a
crashed run's leftovers become reapable soon after the crash.
"""

from __future__ import annotations

import functools
import getpass
import os
import re
import socket
import time
from collections.abc import Mapping

MANAGED = "patchgym.managed"
RUN_ID = "patchgym.run-id"
ROLLOUT_ID = "patchgym.rollout-id"
SANDBOX_ID = "patchgym.sandbox-id"
POOL_ID = "patchgym.pool-id"
"""Set on warm-pool members (see :mod:`patchgym_sandbox.pool`)."""
FORK_OF = "patchgym.fork-of"
"""Set on the sandboxes made by ``Sandbox.fork``: the id of the sandbox they copy (and on
the snapshot a backend keeps for them, e.g. docker's committed image, so reap finds it)."""
EXPIRES_AT = "patchgym.expires-at"
"""Unix time (integer seconds, as a string) after which the sandbox may be reaped."""
OWNER = "patchgym.owner"
"""``user.host`` of the process that made the sandbox (``reap --all-mine`` selects on it)."""
CREATED_AT = "patchgym.created-at"
"""Unix time (integer seconds, as a string) the sandbox was provisioned."""

DEFAULT_LEASE_S = 600.0
"""Ten minutes: an episode's sandbox renews it on use; a crashed run's expires soon after."""

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _safe(text: str) -> str:
    return _UNSAFE.sub("-", text).strip("-.")[:63] or "unknown"


@functools.cache
def owner() -> str:
    """This process's owner label: ``user.host`` (label-safe)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid{os.getuid()}"
    return _safe(f"{user}.{socket.gethostname()}")


@functools.cache
def default_run_id() -> str:
    """One run id per process (host, pid, start time) for sandboxes made without one."""
    return _safe(f"{socket.gethostname()}-{os.getpid()}-{int(time.time())}")


def expires_at(lease_s: float, now: float | None = None) -> int:
    return int((time.time() if now is None else now) + lease_s)


def is_expired(labels: Mapping[str, str], now: float | None = None) -> bool:
    raw = labels.get(EXPIRES_AT)
    if raw is None:
        return False
    try:
        return float(raw) <= (time.time() if now is None else now)
    except ValueError:
        return True


def matches(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    """Every key of ``selector`` is present in ``labels`` with the same value."""
    return all(labels.get(k) == v for k, v in selector.items())


def should_reap(
    labels: Mapping[str, str],
    selector: Mapping[str, str] | None,
    *,
    expired: bool,
    now: float | None = None,
) -> bool:
    """The reap rule shared by all backends: ours, and (matching the selector or expired)."""
    if labels.get(MANAGED) != "true":
        return False
    if selector and matches(labels, selector):
        return True
    return expired and is_expired(labels, now)
