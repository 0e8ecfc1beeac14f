"""The exec server's code, compiled once per driver and handed to each sandbox as bytes.

A sandbox's init (:mod:`patchgym_sandbox.nsinit`) used to compile its three sources from
``python -c`` arguments at every start (~5 ms of it). Instead they are compiled once per
driver process by the interpreter that runs the server: in process where that is the
driver's own, else by that interpreter in one subprocess (:data:`COMPILER`, at the first
start; any CPython from 3.6 on). The marshalled code objects go into a sealed ``memfd``
whose descriptor each init inherits: :data:`BOOT` reads it, closes it and runs the init.
Marshal data is only ever read on the sandbox's side (never from it), and only by the
interpreter that wrote it. An interpreter that cannot compile them so gets the sources as
before.
"""

from __future__ import annotations

import fcntl
import logging
import marshal
import os
import subprocess
import sys
import threading
from functools import cache
from importlib import resources

PARTS = ("nsinit.py", "serve.py", "supervisor.py")
NAMES = ("patchgym_nsinit", "patchgym_serve", "patchgym_supervisor")
BOOT = (
    "import marshal, os, sys\n"
    "fd = int(sys.argv[1]); data = b''\n"
    "while True:\n"
    "    chunk = os.pread(fd, 1 << 20, len(data))\n"
    "    if not chunk: break\n"
    "    data += chunk\n"
    "os.close(fd)\n"
    "init, serve, sup = marshal.loads(data)\n"
    "sys.argv[1:2] = [serve, sup]\n"
    "exec(init, {'__name__': '__main__'})\n"
)
"""``python -I -S -c BOOT <fd> <json config>``: the init with ``argv`` as it expects."""
COMPILER = (
    "import marshal, sys\n"
    "srcs = sys.stdin.buffer.read().decode('utf-8').split('\\0')\n"
    "code = tuple(compile(s, n, 'exec') for s, n in zip(srcs, sys.argv[1:]))\n"
    "sys.stdout.buffer.write(marshal.dumps(code))\n"
)
"""``python -I -S -c COMPILER <names...>``: the sources (NUL-separated) on stdin, their
marshalled code objects on stdout, as that interpreter compiles them."""
COMPILE_TIMEOUT_S = 60.0
log = logging.getLogger(__name__)
_lock = threading.Lock()


@cache
def source(name: str) -> str:
    return resources.files("patchgym_sandbox").joinpath(name).read_text()


def same_interpreter(python: str) -> bool:
    return os.path.realpath(python) == os.path.realpath(sys.executable)


def trusted(program: str) -> bool:
    """Whether ``program`` may run here, on the driver's side: owned by root or the driver's
    user and writable by its owner alone (never a file a sandbox, or anyone else, could
    have replaced)."""
    try:
        st = os.stat(program)
    except OSError:
        return False
    return st.st_uid in (0, os.geteuid()) and not st.st_mode & 0o022


def _compiled(python: str) -> bytes | None:
    """The marshalled code objects of :data:`PARTS` as ``python`` compiles them, or None
    (logged) where it cannot (not a CPython, too old, gone)."""
    sources = [source(p) for p in PARTS]
    if same_interpreter(python):
        return marshal.dumps(
            tuple(compile(s, n, "exec") for s, n in zip(sources, NAMES, strict=True))
        )
    if not trusted(python):
        log.info("the exec server's code is compiled at every start by %s (not run here: "
                 "writable by others than its owner, or owned by another user)", python)  # fmt: skip
        return None
    try:
        done = subprocess.run(
            [python, "-I", "-S", "-c", COMPILER, *NAMES],
            input="\0".join(sources).encode(),
            capture_output=True,
            timeout=COMPILE_TIMEOUT_S,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("the exec server's code is compiled at every start by %s (%s)", python, exc)
        return None
    return done.stdout


@cache
def _memfd(python: str) -> int | None:
    data = _compiled(python)
    if data is None:
        return None
    fd = os.memfd_create("patchgym-boot", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    while data:
        data = data[os.write(fd, data) :]
    seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def boot_fd(python: str) -> int | None:
    """The sealed memfd with the code ``python`` compiled (made once per process and
    interpreter; never closed), or None where it could not compile it."""
    with _lock:
        return _memfd(os.path.realpath(python))


def argv(python: str, config: str, *, precompiled: bool) -> tuple[list[str], tuple[int, ...]]:
    """The interpreter's argv for the init, and the descriptors it must inherit
    (``precompiled``: the sandbox passes an inherited descriptor on to its command)."""
    fd = boot_fd(python) if precompiled else None
    if fd is not None:
        return [python, "-I", "-S", "-c", BOOT, str(fd), config], (fd,)
    return [python, "-I", "-S", "-c", *map(source, PARTS), config], ()
