"""Keep the OOM killer off a sandbox's namespace init: set from outside, unwritable inside.

Pages of a tmpfs belong to no process, so a sandbox that fills ``/tmp`` up to its memory
limit leaves the OOM killer choosing among processes of nearly equal size, often PID 1 of
the namespace, which ends the whole sandbox. The driver sets the init's
``oom_score_adj`` to -1000 right after launch (:func:`protect`); the init resets it to 0 in
every command it starts, so commands stay killable and only the init is spared. Lowering
below 0 needs ``CAP_SYS_RESOURCE``: where the driver lacks it (some VMs, rootless runs) the
write fails, :func:`protect` returns False, and the init keeps 0.

Raising a score needs no privilege, only write access to the ``/proc`` file, and the
kernel gives a process's ``/proc`` files to the root of the user namespace its memory was
made in: the sandbox's root. So the init is started through :func:`loader_fd`: the ELF
interpreter (``ld.so``) of its Python, copied into a sealed memfd owned by this machine's
root with mode ``0111``. The sandbox's root may run that file but not read it, so the
kernel (``would_dump`` at exec) marks the init non-dumpable and records this machine's
initial user namespace as its memory's owner: every ``/proc/1/*`` and
``/proc/1/task/*/*`` file, every thread's ``/proc/<tid>/*``, then belongs to this
machine's root, unmapped inside, and root inside (no capabilities, and none would apply
to an unmapped owner) gets only the "other" bits (``r--``): ``oom_score_adj`` and
``oom_adj`` cannot be written by any path, nor ``/proc/1/fd`` or ``mem`` opened. Python
itself is loaded by that ``ld.so`` from its own path (``sys.executable``, ``$ORIGIN`` and
the prefix as before). Commands are not affected: their ``exec`` makes a new memory in
the sandbox's namespace. The guard needs a driver running as root (the sandbox's root is
then another uid, :mod:`.rootless`); a driver that is not makes the memfd its own, the
sandbox root's, and the init's files stay the sandbox's.
"""

from __future__ import annotations

import fcntl
import logging
import os
import struct
import threading
from functools import cache

log = logging.getLogger(__name__)

PROTECTED = -1000
LEGACY_PROTECTED = -17
"""``OOM_DISABLE`` of ``oom_adj``: -1000 in ``oom_score_adj``."""
PT_INTERP = 3
_reported = False
_lock = threading.Lock()


def protect(pid: int) -> bool:
    """Set ``pid``'s ``oom_score_adj`` to -1000; whether it held (said once per process,
    at INFO, either way).

    Written as the legacy ``oom_adj = -17`` (the same -1000): a privileged write of
    ``oom_score_adj`` would also set the floor (``oom_score_adj_min``) every child
    inherits, letting any command lower itself to -1000 unprivileged; the legacy file
    leaves the floor at 0."""
    global _reported
    try:
        with open(f"/proc/{pid}/oom_adj", "w") as fh:
            fh.write(str(LEGACY_PROTECTED))
        with open(f"/proc/{pid}/oom_score_adj") as fh:
            held = int(fh.read().strip()) == PROTECTED
        problem = None if held else "the score did not hold"
    except (OSError, ValueError) as exc:
        held, problem = False, f"{exc}: needs CAP_SYS_RESOURCE"
    if not _reported:
        _reported = True
        if held:
            log.info("sandbox inits are protected from the OOM killer (oom_score_adj -1000)")
        else:
            log.info("cannot protect sandbox inits from the OOM killer (%s)", problem)
    return held


ELF_LAYOUT = {1: ("I", 12, 26, 4, 16), 2: ("Q", 16, 38, 8, 32)}
"""ELF class -> (word, ``e_phoff``, ``e_phentsize`` offsets past the ident; ``p_offset``,
``p_filesz`` offsets in a program header)."""


def elf_interpreter(path: str) -> str | None:
    """The ``PT_INTERP`` of the ELF executable at ``path`` (its ``ld.so``); None for a
    static executable or a file that is not ELF (a script)."""
    with open(path, "rb") as fh:
        ident = fh.read(16)
        if ident[:4] != b"\x7fELF" or ident[4] not in ELF_LAYOUT or ident[5] not in (1, 2):
            return None
        word, at_phoff, at_phent, at_off, at_size = ELF_LAYOUT[ident[4]]
        end = "<" if ident[5] == 1 else ">"
        header = fh.read(48)
        (phoff,) = struct.unpack_from(end + word, header, at_phoff)
        phentsize, phnum = struct.unpack_from(end + "HH", header, at_phent)
        for i in range(phnum):
            fh.seek(phoff + i * phentsize)
            entry = fh.read(phentsize)
            if struct.unpack_from(end + "I", entry)[0] != PT_INTERP:
                continue
            (offset,) = struct.unpack_from(end + word, entry, at_off)
            (size,) = struct.unpack_from(end + word, entry, at_size)
            fh.seek(offset)
            return fh.read(size).split(b"\0", 1)[0].decode()
    return None


def loader_fd(python: str) -> int | None:
    """A sealed, execute-only (``0111``, owned by this process's uid) memfd holding the
    ``ld.so`` that loads ``python``; made once per process, never closed. None (logged)
    where ``python`` names no ELF interpreter: its init then runs unguarded."""
    with _lock:
        return _loader_fd(python)


@cache
def _loader_fd(python: str) -> int | None:
    try:
        interp = elf_interpreter(python)
        if interp is None:
            raise OSError(f"{python} is not a dynamically linked ELF executable")
        with open(interp, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        log.warning("sandbox inits run without a guarded OOM score (%s)", exc)
        return None
    fd = os.memfd_create("patchgym-ld.so", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    while data:
        data = data[os.write(fd, data) :]
    os.fchmod(fd, 0o111)
    seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def loader_fds(python: str) -> tuple[int, ...]:
    """The descriptors the launcher must pass on for :func:`guarded` (none, or the loader)."""
    fd = loader_fd(python)
    return () if fd is None else (fd,)


def guarded(command: list[str]) -> list[str]:
    """``command`` (``[python, args...]``) run by the loader of :func:`loader_fd`;
    unchanged where there is none."""
    fd = loader_fd(command[0])
    return command if fd is None else [f"/proc/self/fd/{fd}", *command]
