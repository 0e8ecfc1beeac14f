"""Extracting a tar stream that came out of an untrusted sandbox onto this machine."""

from __future__ import annotations

import os
import tarfile
from collections.abc import Callable
from pathlib import Path

from patchgym_sandbox.errors import PathOutsideSandbox

TarFilter = Callable[[tarfile.TarInfo, str], tarfile.TarInfo]


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def within(dest: str | os.PathLike[str]) -> TarFilter:
    """A ``tarfile`` extraction filter for a download whose top entry becomes ``dest``.

    tarfile's ``data`` filter (no absolute names, devices or set-id bits) checks against the
    directory extracted into, which is ``dest``'s parent; this also keeps every name and
    every link target inside ``dest`` itself, so a planted ``link -> ../../x`` cannot point
    at a sibling of ``dest`` on this machine.
    """
    root = os.path.realpath(dest)

    def check(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo:
        member = tarfile.data_filter(member, path)
        name = os.path.realpath(os.path.join(path, member.name))
        if not _inside(name, root):
            raise tarfile.OutsideDestinationError(member, name)
        if member.issym():
            target = os.path.join(path, os.path.dirname(member.name), member.linkname)
        elif member.islnk():
            target = os.path.join(path, member.linkname)
        else:
            return member
        resolved = os.path.realpath(target)
        if not _inside(resolved, root):
            raise tarfile.LinkOutsideDestinationError(member, resolved)
        return member

    return check


def refused(exc: tarfile.FilterError, dest: Path) -> PathOutsideSandbox:
    """The typed error for a member that would land (or point) outside ``dest``."""
    return PathOutsideSandbox(
        f"download into {dest} refused {exc.tarinfo.name!r}: {exc} (names and links must stay "
        "inside the downloaded tree)"
    )
