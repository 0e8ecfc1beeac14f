"""Paths in a dataset row are data: they resolve only beneath the data roots, or not at all.

A row names a local template (``template``) and a built environment
(``metadata.local_env.path``) that the local backend binds into the sandbox. Taken as host
paths, a row could bind ``/run`` (the Docker socket), ``/proc`` (host processes) or make
root's home the working copy. So each such path is resolved (links included) and must lie
beneath a **data root**, else the row is refused with a :class:`RowPathError` naming the
row and the field. The data roots are:

- the cache (``$PATCHGYM_CACHE_DIR`` or ``~/.cache/patchgym``: bundled templates, built
  environments);
- the folders named by the ``data_roots`` env setting and ``$PATCHGYM_DATA_ROOTS``
  (``os.pathsep``-separated);
- any folder holding a :data:`ROOT_MARKER` file, which ``patchgym datasets build-local``
  writes into its output and cache folders (a row cannot create one: it is data).

The interpreter a built environment runs from (``base_prefix``) is not taken from the
row: it is read from the environment's own ``pyvenv.cfg``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from patchgym_envs.bundled.template import cache_home
from patchgym_envs.errors import DatasetError

ROOT_MARKER = ".patchgym-data-root"
ROOTS_VAR = "PATCHGYM_DATA_ROOTS"


class RowPathError(DatasetError, ValueError):
    """A path in a row lies outside every data root (or does not exist)."""

    def __init__(self, task_id: str, field: str, message: str) -> None:
        super().__init__(f"row {task_id!r}, field {field!r}: {message}")
        self.task_id = task_id
        self.field = field


def mark_root(folder: Path) -> None:
    """Declare ``folder`` a data root (what ``build-local`` does with its output)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ROOT_MARKER).write_text("rows may name paths beneath this folder\n")


def data_roots(extra: Sequence[str] = ()) -> list[Path]:
    env = [p for p in os.environ.get(ROOTS_VAR, "").split(os.pathsep) if p]
    return [cache_home(), *(Path(p) for p in [*extra, *env])]


def _marked(folder: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(folder / ROOT_MARKER).st_mode)
    except OSError:
        return False


def resolve(task_id: str, field: str, value: str, roots: Sequence[Path]) -> Path:
    """``value`` with every link resolved, if it is a folder beneath a data root."""
    if not value or not os.path.isabs(value):
        raise RowPathError(task_id, field, f"{value!r} is not an absolute path")
    try:
        real = Path(value).resolve(strict=True)
    except (OSError, RuntimeError):
        raise RowPathError(task_id, field, f"{field} folder not found: {value!r}") from None
    if not real.is_dir():
        raise RowPathError(task_id, field, f"{value!r} is not a folder")
    for root in roots:
        try:
            top = root.resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        if real != top and real.is_relative_to(top):
            return real
    if any(_marked(parent) for parent in real.parents):
        return real
    where = ", ".join(str(r) for r in roots)
    raise RowPathError(
        task_id,
        field,
        f"{value!r} (resolved {str(real)!r}) is outside the data roots ({where}); a row's "
        f"paths are data: build it with `patchgym datasets build-local`, or name its folder "
        f"in the env's data_roots / ${ROOTS_VAR}",
    )


def venv_base_prefix(env: Path) -> str | None:
    """The installation a virtualenv's interpreter runs from (``home`` in ``pyvenv.cfg``)."""
    cfg = env / "pyvenv.cfg"
    try:
        lines = cfg.read_text().splitlines() if cfg.is_file() and not cfg.is_symlink() else []
    except OSError:
        return None
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home" and value.strip():
            return str(Path(value.strip()).parent)
    return None
