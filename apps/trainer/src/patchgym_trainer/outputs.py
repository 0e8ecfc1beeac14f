"""A run's output files: each written whole or not at all; a full disk is an expected error.

:func:`write_text` writes beside the target and renames, so a file in the output folder is
always complete and an earlier version is never truncated. When the disk is full it raises
:class:`~patchgym_trainer.errors.DiskFull`; :func:`kept_on_full_disk` around a report's
writes adds what the folder kept, for the one-line message the CLI prints (exit 4).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from patchgym_trainer.errors import DiskFull

FULL = (errno.ENOSPC, errno.EDQUOT)


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (a hidden temporary file, then a rename)."""
    return write_bytes(path, text.encode("utf-8"))


def write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (a hidden temporary file, then a rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.errno in FULL:
            raise DiskFull(path, exc.strerror or "no space left on device") from None
        raise
    return path


def kept(folder: Path) -> list[str]:
    """The complete files in ``folder`` (temporary files of an unfinished write left out)."""
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))


@contextmanager
def kept_on_full_disk(folder: Path) -> Iterator[None]:
    """Name what ``folder`` kept when a write inside the block finds the disk full."""
    try:
        yield
    except DiskFull as exc:
        exc.folder, exc.kept = str(folder), kept(folder)
        raise
    except OSError as exc:  # a write outside write_text (a library's own file)
        if exc.errno not in FULL:
            raise
        full = DiskFull(exc.filename or folder, exc.strerror or "no space left on device")
        full.folder, full.kept = str(folder), kept(folder)
        raise full from None
