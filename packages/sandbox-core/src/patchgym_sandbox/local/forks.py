"""Fork snapshots of the local backend: a parent's writable state, shared read-only by its children.

``take`` copies the parent's working-copy layer (its overlay upper dir when it has one,
else the whole working copy), its /tmp and its home into ``<state_dir>/forks/<id>/``,
through descriptors only (:mod:`patchgym_sandbox.local.snapcopy`): the parent's processes
may be swapping its directories for links while the copy runs, so nothing is opened by
path beneath a directory they control. The
parent keeps running and writing, so its own upper cannot be a lower layer: a copy is
taken, once per fork (the upper is only what the parent changed). Nothing is frozen: the
cgroup v1 hierarchy here has no freezer in use and stopping the processes with signals
would show through to them (shells report stopped jobs), so ``Sandbox.fork`` documents
"fork between commands" instead.

Children mount ``[snapshot, template]`` as the lower layers of a fresh overlay (or copy the
snapshot in copy mode). Each child holds a reference, ``refs/<child id>``, written before
any child starts; the remover whose ``rmdir refs`` succeeds (empty) removes the snapshot,
so exactly one does, across processes. ``sweep`` (run by ``reap``) drops the references of
children that are gone once the forking driver is dead, which removes snapshots left by a
driver killed mid-fork.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from patchgym_sandbox.local import snapcopy, workcopy

FORKS = "forks"


@dataclass(frozen=True, slots=True)
class Snapshot:
    path: Path
    layered: bool
    """``root`` is an overlay upper dir: the template goes beneath it."""

    def part(self, name: str) -> Path:
        return self.path / name


def take(
    state_dir: Path, parts: dict[str, Path], *, layered: bool, children: Iterable[str]
) -> Snapshot:
    """Copy ``parts`` (name -> directory of the parent) into a new snapshot that
    ``children`` reference."""
    snap = Snapshot(state_dir / FORKS / f"fork-{uuid.uuid4().hex[:12]}", layered)
    refs = snap.path / "refs"
    refs.mkdir(parents=True)
    (snap.path / "driver").write_text(str(os.getpid()))
    for child in children:
        (refs / child).touch()
    try:
        for name, source in parts.items():
            target = snap.part(name)
            target.mkdir()
            if source.is_dir():
                snapcopy.copy_beneath(source, target)
    except BaseException:
        workcopy.remove_tree(snap.path)
        raise
    return snap


def drop_ref(snapshot: Path, child: str) -> None:
    """Drop ``child``'s reference; the caller that drops the last one removes the snapshot."""
    with contextlib.suppress(FileNotFoundError):
        (snapshot / "refs" / child).unlink()
    try:
        (snapshot / "refs").rmdir()
    except OSError:  # other references left, or another remover got there first
        return
    workcopy.remove_tree(snapshot)


def drop_refs(snapshot: Path, children: Iterable[str]) -> None:
    for child in children:
        drop_ref(snapshot, child)


def sweep(state_dir: Path) -> list[Path]:
    """Drop references of children that are gone, where the forking driver is dead."""
    removed: list[Path] = []
    root = state_dir / FORKS
    if not root.is_dir():
        return removed
    for snapshot in root.iterdir():
        if _driver_alive(snapshot):
            continue
        refs = snapshot / "refs"
        for ref in list(refs.iterdir()) if refs.is_dir() else []:
            if not (state_dir / ref.name).is_dir():
                with contextlib.suppress(FileNotFoundError):
                    ref.unlink()
        try:
            refs.rmdir()
        except FileNotFoundError:
            pass  # never referenced (killed inside take), or being removed already
        except OSError:
            continue  # children still there
        workcopy.remove_tree(snapshot)
        removed.append(snapshot)
    return removed


def _driver_alive(snapshot: Path) -> bool:
    try:
        pid = int((snapshot / "driver").read_text())
    except (OSError, ValueError):
        return False
    return pid_alive(pid)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (a driver that left state behind)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
