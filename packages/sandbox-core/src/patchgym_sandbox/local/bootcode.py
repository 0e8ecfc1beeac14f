"""The exec server's code, compiled once per driver and handed to each sandbox as bytes.

A sandbox's init (:mod:`patchgym_sandbox.nsinit`) used to compile its three sources from
``python -c`` arguments at every start (~5 ms of it). When the sandbox runs the driver's
own interpreter (the default), the driver compiles them once, marshals the code objects
into a sealed ``memfd`` and passes its descriptor: :data:`BOOT` reads it, closes it and
runs the init. Marshal data is only ever read on the sandbox's side (never from it), and
only by the interpreter that wrote it. Any other interpreter gets the sources as before.
"""

from __future__ import annotations

import fcntl
import marshal
import os
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
_lock = threading.Lock()


@cache
def source(name: str) -> str:
    return resources.files("patchgym_sandbox").joinpath(name).read_text()


def same_interpreter(python: str) -> bool:
    return os.path.realpath(python) == os.path.realpath(sys.executable)


@cache
def _memfd() -> int:
    code = tuple(compile(source(p), n, "exec") for p, n in zip(PARTS, NAMES, strict=True))
    fd = os.memfd_create("patchgym-boot", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    data = marshal.dumps(code)
    while data:
        data = data[os.write(fd, data) :]
    seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def boot_fd() -> int:
    """The sealed memfd with the marshalled code (made once per process; never closed)."""
    with _lock:
        return _memfd()


def argv(python: str, config: str, *, precompiled: bool) -> tuple[list[str], tuple[int, ...]]:
    """The interpreter's argv for the init, and the descriptors it must inherit
    (``precompiled``: the sandbox passes an inherited descriptor on to its command)."""
    if precompiled and same_interpreter(python):
        fd = boot_fd()
        return [python, "-I", "-S", "-c", BOOT, str(fd), config], (fd,)
    return [python, "-I", "-S", "-c", *map(source, PARTS), config], ()
