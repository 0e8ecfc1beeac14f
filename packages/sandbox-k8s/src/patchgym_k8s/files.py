"""Files as tar streams over exec: argv builders and the reading of their outcome.

Uploads go to stdin prefixed by their length (``head -c N | tar -x``), because the exec
protocol before v5 cannot close stdin; downloads are a ``tar -c`` or ``cat`` on stdout,
read as bytes.
"""

from __future__ import annotations

import io
import posixpath
import tarfile
import time

PUT = 'mkdir -p -- "$1" && head -c "$2" | tar -x --no-same-owner -f - -C "$1"'
GET = '[ -e "$1" ] || exit 66; cd -- "$(dirname -- "$1")" && exec tar -c -f - -- "$(basename -- "$1")"'
CAT = (
    '[ -e "$1" ] || exit 66; [ -f "$1" ] || { echo "not a regular file: $1" >&2; exit 67; }; '
    'exec head -c "$2" -- "$1"'
)
NOT_FOUND_CODES = frozenset({66})
NOT_REGULAR_CODE = 67


def put_argv(dest_dir: str, size: int) -> list[str]:
    return ["sh", "-c", PUT, "patchgym-put", dest_dir, str(size)]


def get_argv(path: str) -> list[str]:
    return ["sh", "-c", GET, "patchgym-get", path]


def cat_argv(path: str, max_bytes: int) -> list[str]:
    """``cat`` of a regular file (links followed), at most ``max_bytes + 1`` bytes (the one
    past the cap tells the caller the file is larger); FIFOs and devices are never opened."""
    return ["sh", "-c", CAT, "patchgym-cat", path, str(max_bytes + 1)]


def single_file_tar(path: str, data: bytes, mode: int) -> tuple[str, bytes]:
    """(parent directory, a tar holding ``basename(path)`` with ``data`` and ``mode``)."""
    parent, name = posixpath.split(path)
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = int(time.time())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.addfile(info, io.BytesIO(data))
    return parent or "/", buf.getvalue()
