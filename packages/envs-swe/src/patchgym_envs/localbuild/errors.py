"""Why a row could not become a locally runnable task."""

from __future__ import annotations


class BuildFailed(RuntimeError):
    """A step of building a template or an environment failed; the message says which."""


class Unbuildable(ValueError):
    """The row's spec cannot be built with uv on this machine (decided before building)."""
