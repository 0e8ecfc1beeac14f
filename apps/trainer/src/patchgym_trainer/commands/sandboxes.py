"""``patchgym sandboxes list|reap``: what patchgym left on a backend, and removing it.

Works on every backend through the protocol's ``list_sandboxes`` / ``reap`` (local,
docker, k8s, ags): the selection is by label — a run id (``--run``), an expired lease
(``--expired``), or everything this user made on this host (``--all-mine``, by the
``patchgym.owner`` label). ``--dry-run`` shows what would go, removing nothing.

``reap --images`` removes instead the images the backend derived (docker: images pulled
as-is reduced to their base commit, :mod:`patchgym_sandbox.derived`) that are no longer
current (the source re-pulled or gone, the script changed), and with ``--older-than`` those
older than that; never one a container uses, never an image patchgym did not make.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from patchgym_sandbox import create_backend
from patchgym_sandbox import labels as L
from patchgym_sandbox.backend import SandboxInfo
from patchgym_trainer.errors import ConfigError
from patchgym_trainer.schema import AppConfig


class Selection(BaseModel):
    """Which leftovers ``reap`` takes: exactly one of the three ways."""

    labels: dict[str, str] | None = None
    expired: bool = False

    @classmethod
    def from_flags(cls, run: str | None, expired: bool, all_mine: bool) -> Selection:
        chosen = [
            n
            for n, on in (
                ("--run", run is not None),
                ("--expired", expired),
                ("--all-mine", all_mine),
            )
            if on
        ]
        if len(chosen) != 1:
            raise ConfigError(
                "sandboxes reap needs exactly one of --run ID, --expired, --all-mine"
                + (f" (got {', '.join(chosen)})" if chosen else "")
            )
        if run is not None:
            return cls(labels={L.RUN_ID: run})
        if all_mine:
            return cls(labels={L.OWNER: L.owner()})
        return cls(expired=True)

    def takes(self, info: SandboxInfo, now: float) -> bool:
        return L.should_reap(info.labels, self.labels, expired=self.expired, now=now)


def _ago(seconds: float) -> str:
    s = int(abs(seconds))
    text = f"{s}s" if s < 120 else f"{s // 60}m" if s < 7200 else f"{s // 3600}h"
    return text


def _num(labels: Mapping[str, str], key: str) -> float | None:
    try:
        return float(labels[key])
    except (KeyError, ValueError):
        return None


def render(backend: str, infos: list[SandboxInfo], console: Console, *, title: str) -> None:
    """One row per sandbox; the id is never wrapped (it is what `reap` and the engine's own
    tools take), the other cells fold; the backend is in the title, not a column."""
    now = time.time()
    table = Table(title=title)
    table.add_column("id", no_wrap=True, min_width=max((len(i.id) for i in infos), default=2))
    for col in ("run", "rollout", "owner", "age", "lease", "state"):
        table.add_column(col, overflow="fold")
    for info in infos:
        created = _num(info.labels, L.CREATED_AT)
        expires = _num(info.labels, L.EXPIRES_AT)
        lease = (
            "none"
            if expires is None
            else (
                f"expired {_ago(now - expires)} ago"
                if expires <= now
                else f"{_ago(expires - now)} left"
            )
        )
        table.add_row(
            info.id,
            info.labels.get(L.RUN_ID, "-"),
            info.labels.get(L.ROLLOUT_ID, "-"),
            info.labels.get(L.OWNER, "-"),
            "?" if created is None else _ago(now - created),
            lease,
            info.state,
        )
    console.print(table)


async def list_sandboxes(cfg: AppConfig, console: Console) -> list[SandboxInfo]:
    backend = create_backend(cfg.sandbox)
    try:
        infos = await backend.list_sandboxes()
    finally:
        await backend.aclose()
    render(backend.name, infos, console, title=f"{len(infos)} patchgym sandboxes on {backend.name}")
    return infos


async def reap(
    cfg: AppConfig, selection: Selection, console: Console, *, dry_run: bool
) -> list[str]:
    backend = create_backend(cfg.sandbox)
    try:
        now = time.time()
        chosen = [i for i in await backend.list_sandboxes() if selection.takes(i, now)]
        if dry_run:
            render(
                backend.name, chosen, console, title=f"would reap {len(chosen)} on {backend.name}"
            )
            return [i.id for i in chosen]
        removed = await backend.reap(selection.labels, expired=selection.expired)
    finally:
        await backend.aclose()
    console.print(f"reaped {len(removed)} sandboxes on {backend.name}: {', '.join(removed) or '-'}")
    return removed


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_age(text: str) -> float:
    """``90s``, ``30m``, ``12h``, ``7d`` or plain seconds -> seconds (``--older-than``)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if m is None:
        raise ConfigError(
            f"--older-than {text!r}: give a number of seconds or one with a unit (30m, 12h, 7d)"
        )
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


async def reap_images(
    cfg: AppConfig, console: Console, *, older_than_s: float | None, dry_run: bool
) -> dict[str, str]:
    """Remove the backend's stale derived images (``ref -> why``); ``dry_run`` only lists."""
    backend = create_backend(cfg.sandbox)
    try:
        picked = await backend.reap_derived_images(older_than_s=older_than_s, dry_run=dry_run)
    finally:
        await backend.aclose()
    verb = "would remove" if dry_run else "removed"
    table = Table(title=f"{verb} {len(picked)} derived images on {backend.name}")
    table.add_column("image", no_wrap=True)
    table.add_column("why", overflow="fold")
    for ref, why in picked.items():
        table.add_row(ref, why)
    console.print(table)
    return picked
