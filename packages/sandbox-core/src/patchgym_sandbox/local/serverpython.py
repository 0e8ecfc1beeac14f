"""Which interpreter runs an isolated sandbox's exec server when the config names none.

The server (:mod:`patchgym_sandbox.nsinit`) starts with every sandbox, so its
interpreter's start is part of every ``create``. Before it says ``READY`` it loads
:data:`SERVER_EXTENSIONS`: a Python built with a shared ``libpython`` (pyenv's, and most
that tools install) loads each from a shared object of its own, while a distribution's
``/usr/bin/python3`` (Debian's, Ubuntu's) links ``libpython`` statically and has most of
them built in. Measured on a 2-core VM (Debian's 3.11 against pyenv's 3.11): about 2 ms
less of each sandbox's start, and as much less CPU.

So the server runs on the system's ``python3`` where it is a CPython from 3.6 on (the
server's code runs on any; :mod:`.bootcode` has it compiled by the interpreter that runs
it), under ``/usr`` (bound into every sandbox), imports every module the server imports,
and has more of :data:`SERVER_EXTENSIONS` built in than the driver's own interpreter.
Found once per process (one probe); anything else keeps the driver's interpreter. The
tasks' own ``python`` is not this one: it is whatever their ``PATH`` finds.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterable
from functools import cache

from patchgym_sandbox.local.bootcode import same_interpreter, trusted

SERVER_EXTENSIONS = ("select", "binascii", "_posixsubprocess", "_json", "_ctypes")
"""Extension modules the server imports before ``READY``."""
SERVER_MODULES = (*SERVER_EXTENSIONS, "_signal", "_thread", "errno", "marshal", "os", "time")
"""Everything the server imports at start (``resource``, ``fcntl`` and ``termios`` load
later, only where a sandbox needs them, and are importable wherever these are)."""
CANDIDATES = ("/usr/bin/python3",)
SYSTEM_PREFIX = "/usr/"
PROBE = (
    "import sys\n"
    "import " + ", ".join(SERVER_MODULES) + "\n"
    "print(sys.version_info >= (3, 6) and sys.implementation.name == 'cpython')\n"
    "print(' '.join(sys.builtin_module_names))\n"
)
PROBE_TIMEOUT_S = 30.0
log = logging.getLogger(__name__)


def server_python(driver: str) -> str:
    """The interpreter for the exec server: a candidate that starts it faster than
    ``driver`` (the driver's own, a real path), else ``driver``."""
    return _choose(driver, CANDIDATES)


@cache
def _choose(driver: str, candidates: tuple[str, ...]) -> str:
    mine = built_in(sys.builtin_module_names) if same_interpreter(driver) else None
    driver_real = os.path.realpath(driver)
    for candidate in candidates:
        real = os.path.realpath(candidate)
        if real == driver_real or not real.startswith(SYSTEM_PREFIX) or not trusted(real):
            continue
        theirs = _probe(real)
        if theirs is None:
            continue
        if mine is None:
            mine = _probe(driver)
        if mine is not None and theirs > mine:
            log.debug("exec servers run on %s (%d of the server's modules built in)", real, theirs)
            return real
    return driver


def built_in(names: Iterable[str]) -> int:
    """How many of :data:`SERVER_EXTENSIONS` are among ``names`` (built-in modules)."""
    return len(set(SERVER_EXTENSIONS) & set(names))


def _probe(python: str) -> int | None:
    """How many of :data:`SERVER_EXTENSIONS` ``python`` has built in, or None where it
    cannot run the server (not a CPython 3.6+, a module missing, not runnable here)."""
    try:
        done = subprocess.run(
            [python, "-I", "-S", "-c", PROBE],
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            check=True,
            text=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.splitlines()
    if len(lines) != 2 or lines[0] != "True":
        return None
    return built_in(lines[1].split())
