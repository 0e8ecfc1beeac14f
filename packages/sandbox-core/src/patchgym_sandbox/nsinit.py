# patchgym namespace init
# ruff: noqa: UP031, UP035
"""PID 1 of an isolated local sandbox: the shared exec server loop plus an init's duties.

Run as ``python3 -I -S -c <this file> <serve.py source> <supervisor source> <json config>``
(or from code objects the driver compiled once, ``local/bootcode.py``) inside the sandbox; stdlib only, Python 3.6+. Commands run through
:class:`patchgym_sandbox.serve.Server` (the one exec server loop every backend uses); this
file adds what only the local backend's namespace init needs:

- it is PID 1 of the sandbox's own PID namespace (bubblewrap ``--as-pid-1``): commands cost
  one fork instead of one sandbox setup, background processes live on between commands,
  nothing inside can kill it (the kernel drops SIGKILL sent to a namespace's init from
  inside), and killing it from outside takes the whole namespace down;
- it reaps orphans, never a child that ``supervise`` waits for (those are registered under
  a lock as they are spawned);
- it makes itself non-dumpable, so commands (root, but without capabilities) cannot open
  its pipes through ``/proc/1/fd`` to forge replies; started by the driver's execute-only
  loader (``local/oomguard.py``), its ``/proc`` files belong to this machine's root, so
  nothing inside can raise its ``oom_score_adj`` either;
- it applies the sandbox's rlimits (``cpu_time_s``) to every command, and resets the OOM
  score the driver protects it with (``local/oomguard.py``), after the command's ``exec``
  through a sealed prelude bash reads (``BASH_ENV``, :func:`prelude_for`), so commands
  still start by ``vfork`` with no Python in the child (a forked child of this threaded
  server running Python can deadlock); only where bash could skip the prelude is it done
  in the child before ``exec``;
- it serves shells on a pty. Extra wire operations, beside ``R`` and ``K``:
  ``<rid> S <b64 json {"argv", "cwd", "env"}>`` open a shell, ``<rid> W <b64>`` write to it,
  ``<rid> I`` kill its foreground job, ``<rid> C`` close it; a shell answers
  ``<rid> 1 <b64>`` with its output and ``<rid> E`` at its end.
"""

import _signal  # type: ignore[import-not-found]  # signal's C half (no stub): signal imports enum
import _thread
import binascii
import os
import select
import sys
import time

TYPE_CHECKING = False  # typing costs ~2.5 ms of the sandbox's start; mypy reads it anyway
if TYPE_CHECKING:
    from typing import Any, Dict, List, Tuple  # noqa: F401 (type comments, Python 3.6)


def _code(src, name):
    # type: (Any, str) -> Any
    """A code object as given (precompiled by the driver, see ``local/bootcode.py``), or
    compiled from its source."""
    return src if isinstance(src, type(_code.__code__)) else compile(src, name, "exec")


SERVE = {"__name__": "patchgym_serve"}  # type: Dict[str, Any]
exec(_code(sys.argv[1], "patchgym_serve"), SERVE)
SUP = SERVE["load_supervisor"](sys.argv[2])  # type: Dict[str, Any]
CONFIG = SUP["json_loads"](sys.argv[3]) if len(sys.argv) > 3 else {}  # type: Dict[str, Any]


def _rlimits(cfg):
    # type: (Dict[str, Any]) -> List[Tuple[Any, int, int]]
    """``(setrlimit, which, value)`` of each configured rlimit: ``resource`` is imported
    only when there is one (a shared library less to load before READY otherwise), never
    in a child."""
    if not cfg:
        return []
    import resource

    return [(resource.setrlimit, getattr(resource, k), int(v)) for k, v in cfg.items()]


LIMITS = _rlimits(CONFIG.get("rlimits") or {})
SPAWN_LOCK = _thread.allocate_lock()
SPAWNED = _thread.allocate_lock()
"""Released at every spawn: the reaper, with no child to wait for, blocks on it."""
SPAWNED.acquire()
OWNED = {}  # type: Dict[int, Any]
"""The supervisor's ``Child`` of each command and shell, by pid: the reaper leaves them to
their owners."""
PRCTL = None  # type: Any
"""The C library's ``prctl(option, arg2, ...)`` once :func:`main` found it (see
:func:`find_prctl`), or None."""
_START = SUP["start_child"]


def start_owned(*args, **kwargs):
    # type: (Any, Any) -> Any
    """The supervisor's ``start_child``, the child registered under the spawn lock."""
    with SPAWN_LOCK:
        child = _START(*args, **kwargs)
        OWNED[child.pid] = child
    try:
        SPAWNED.release()  # wake the reaper if it waits for a first child
    except RuntimeError:  # released already, not taken since
        pass
    return child


def apply_limits():
    # type: () -> None
    """In a command (before exec): the rlimits, and killable again by the OOM killer (the
    driver may have made this init unkillable, ``local/oomguard.py``; children inherit it).
    This child's ``/proc`` files belong to this machine's root, as the init's do, until it
    is dumpable again (its ``exec`` would make it so); its descriptors 0-2 are the
    command's already, so nothing of the init's channel is exposed meanwhile.

    Only where :func:`prelude_for` cannot do the same after the exec: Python running in a
    forked child of this threaded server can deadlock (CPython 3.11 re-initialises its
    thread-state lock only after it needs it, and another thread may hold it at the fork)."""
    if protected():
        try:
            if PRCTL is not None:
                PRCTL(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE = 1
            with open("/proc/self/oom_score_adj", "w") as fh:
                fh.write("0")
        except OSError:
            pass
    for setrlimit, which, value in LIMITS:
        setrlimit(which, (value, value))


def protected():
    # type: () -> bool
    """Whether this init's ``oom_score_adj`` is not 0 (the driver protected it; commands
    must not inherit that). Read at every spawn, once: the driver protects the init after
    it said READY. A command needs its limits set before it runs where this holds or
    rlimits were asked for (``LIMITS``)."""
    return own_oom_score() != b"0"


def own_oom_score():
    # type: () -> bytes
    """This process's ``oom_score_adj``, read at each spawn: three system calls (``open``
    builds a buffered file object around them, three more and ~20 us of a command's start)."""
    try:
        fd = os.open("/proc/self/oom_score_adj", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b"?"
    try:
        return os.read(fd, 64).strip()
    except OSError:
        return b"?"
    finally:
        os.close(fd)


ULIMIT_FLAGS = {"RLIMIT_CPU": "-t", "RLIMIT_NOFILE": "-n", "RLIMIT_NPROC": "-u"}
"""The rlimits bash's ``ulimit`` sets in their own unit (seconds, descriptors, processes):
a flag with no ``-H``/``-S`` sets both limits, as :func:`apply_limits` does."""
POSIX_ENV = ("POSIXLY_CORRECT", "SHELLOPTS", "BASHOPTS")
"""Environment variables that can put bash in POSIX mode, where it skips ``BASH_ENV``."""
PRELUDES = {}  # type: Dict[bool, Any]
"""The prelude's sealed memfd (or None: it cannot be used here), by whether it resets the
OOM score."""
_RO_BASH = {}  # type: Dict[str, bool]


def prelude_for(env, argv_prefix, reset_oom):
    # type: (Dict[str, str], Any, bool) -> Any
    """A descriptor of the prelude every command's bash reads before its command (through
    ``BASH_ENV``, which the caller sets to ``/proc/self/fd/<it>``), or None where the
    limits must be set in the forked child (:func:`apply_limits`).

    The prelude raises the OOM score to 0 (allowed without privilege: the legacy write of
    ``local/oomguard.py`` leaves the floor at 0; after its ``exec`` the command owns its
    ``/proc`` files), sets the rlimits, closes its own descriptor and unsets ``BASH_ENV``,
    so the command starts as it did. It lives in a memfd sealed against every write, so a
    command that reopens it through another command's ``/proc/<pid>/fd`` can read but not
    change it. A failing step exits 126 with a message before the command runs. Not used
    where the command could skip it: a bash that a writable directory could shadow (only
    a read-only mount is trusted), an environment that puts bash in POSIX mode, a wrapper
    ``argv_prefix``, an rlimit ``ulimit`` cannot set exactly, a Python without memfds."""
    if argv_prefix or any(k in env for k in POSIX_ENV) or trusted_bash(env) is None:
        return None
    return prelude_fd(reset_oom)


def trusted_bash(env):
    # type: (Dict[str, str]) -> Any
    """The ``bash`` the ``PATH`` of ``env`` finds, where nothing inside can replace it (a
    read-only mount); else None."""
    bash = SUP["_bash"](env.get("PATH", os.defpath))
    return bash if bash is not None and _read_only(bash) else None


def prelude_fd(reset_oom):
    # type: (bool) -> Any
    """The sealed prelude, made once for each value of ``reset_oom`` (None where it
    cannot be made)."""
    if reset_oom not in PRELUDES:
        PRELUDES[reset_oom] = _make_prelude(reset_oom)
    return PRELUDES[reset_oom]


SHELL_KEEP = ("PS1", "PS2", "SHLVL")
"""What a non-interactive bash changes in the environment it passes on (it unsets the
prompts and counts itself in ``SHLVL``): the shell's first program sets them back."""


def shell_start(argv, env, tty):
    # type: (List[str], Dict[str, str], str) -> Any
    """``(argv, executable, keep_fds)`` that start shell ``argv`` on pty ``tty`` with no
    Python in the forked child (see :func:`apply_limits`); None where that cannot be
    trusted (then the child takes the terminal and its limits before ``exec``).

    The first program, a non-interactive bash, opens the pty by its path, which makes it
    the controlling terminal of the new session (``setsid`` ran in the child), reads the
    prelude where limits apply, sets back what it changed of the environment, then
    becomes the shell."""
    bash = trusted_bash(env)
    if bash is None:
        return None
    script = ['exec 0<>"$1" 1>&0 2>&0 || exit 125']
    args = [tty]
    keep = ()  # type: Tuple[int, ...]
    reset_oom = protected()
    if LIMITS or reset_oom:
        fd = prelude_fd(reset_oom)
        if fd is None:
            return None
        keep = (fd,)
        script.append(". /proc/self/fd/%d || exit 125" % fd)
    for name in SHELL_KEEP:
        if name in env:
            args.append(env[name])
            script.append('export %s="$%d"' % (name, len(args)))
        else:
            script.append("unset " + name)
    script.append('shift %d; exec "$@"' % len(args))
    return ["bash", "-c", "; ".join(script), "patchgym-shell", *args, *argv], bash, keep


def _read_only(path):
    # type: (str) -> bool
    """Whether ``path`` lies on a read-only mount (nothing inside can replace it)."""
    if path not in _RO_BASH:
        try:
            _RO_BASH[path] = bool(os.statvfs(path).f_flag & 1)  # ST_RDONLY
        except OSError:
            _RO_BASH[path] = False
    return _RO_BASH[path]


def _make_prelude(reset_oom):
    # type: (bool) -> Any
    names = CONFIG.get("rlimits") or {}
    if any(k not in ULIMIT_FLAGS for k in names) or not hasattr(os, "memfd_create"):
        return None
    try:
        import fcntl

        fd = os.memfd_create("patchgym-prelude", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    except (ImportError, OSError, AttributeError):
        return None
    fail = " || { echo 'patchgym: cannot %s' >&2; exit 126; }"
    lines = []
    if reset_oom:
        lines.append("echo 0 >/proc/self/oom_score_adj" + fail % "reset the OOM score")
    for name, value in sorted(names.items()):
        lines.append("ulimit %s %d" % (ULIMIT_FLAGS[name], int(value)) + fail % ("set " + name))
    lines += ["exec %d<&-" % fd, "unset BASH_ENV", ""]
    try:
        os.write(fd, "\n".join(lines).encode())
        seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    except (OSError, AttributeError):
        os.close(fd)
        return None
    return fd


def _supervise_with_limits(*args, **kwargs):
    # type: (Any, Any) -> Any
    reset_oom = protected()
    if LIMITS or reset_oom:
        env = kwargs.get("env")
        env = dict(os.environ) if env is None else env
        fd = prelude_for(env, kwargs.get("argv_prefix"), reset_oom)
        if fd is None:
            kwargs["preexec_fn"] = apply_limits
        else:
            kwargs["env"] = dict(env, BASH_ENV="/proc/self/fd/%d" % fd)
            kwargs["keep_fds"] = (fd,)
    return _SUPERVISE(*args, **kwargs)


SUP["start_child"] = start_owned
_SUPERVISE = SUP["supervise"]
SUP["supervise"] = _supervise_with_limits


REAP_POLL_S = 0.2
"""How long the reaper leaves a zombie that is a supervised child to its owner (which
reaps it as its ``supervise`` ends) before it looks through ``/proc`` for the others."""


def reap_orphans():
    # type: () -> None
    """PID 1's duty: reap the zombies nobody else will, never a supervised child. Blocks
    until a child has exited (``waitid`` without reaping it) or, with no child at all,
    until one is spawned: an idle sandbox costs no wake-up (polling ``/proc`` five times a
    second cost ~1.6 ms of CPU a second per sandbox, a few percent of a host running
    dozens). A supervised child's exit wakes it once; it leaves that zombie to its owner
    for :data:`REAP_POLL_S`, and if the owner has not reaped it by then (``waitid`` would
    show no other zombie while it stays), finds the others through ``/proc``
    (:func:`reap_unowned`). So an orphan is reaped as it exits, or within
    :data:`REAP_POLL_S` of it."""
    while True:
        try:
            pid = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT).si_pid  # type: ignore[union-attr]
        except ChildProcessError:
            SPAWNED.acquire(True, 60.0)
            continue
        with SPAWN_LOCK:
            for known, p in list(OWNED.items()):
                if p.returncode is not None:
                    del OWNED[known]
            owned = pid in OWNED
            if not owned:
                _reap(pid)
        if owned:
            time.sleep(REAP_POLL_S)
            with SPAWN_LOCK:
                child = OWNED.get(pid)
                hiding = child is not None and child.returncode is None
            if hiding:
                reap_unowned()


def reap_unowned():
    # type: () -> None
    """Reap every zombie child of this init that no supervisor owns (``/proc``)."""
    me = str(os.getpid())
    with SPAWN_LOCK:
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in OWNED:
                continue
            try:
                with open("/proc/%s/stat" % name) as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] == "Z" and fields[1] == me:
                _reap(int(name))


def _reap(pid):
    # type: (int) -> None
    try:
        os.waitpid(pid, os.WNOHANG)
    except OSError:
        pass


def _take_tty(ioctl, request):
    # type: (Any, int) -> None
    """In a shell's child: the pty as its controlling terminal (``fcntl`` and ``termios``
    imported by the parent: only shells need them, and never an import in a child)."""
    ioctl(0, request, 0)
    apply_limits()


_Server = SERVE["Server"]  # type: Any


class InitServer(_Server):  # type: ignore[misc]  # the base is untyped stdlib socketserver glue
    """The shared server loop plus shells on a pty."""

    def __init__(self):
        # type: () -> None
        super().__init__(SUP, sys.stdin.buffer, sys.stdout.buffer)
        self.shells = {}  # type: Dict[bytes, Tuple[Any, int, List[bool]]]
        """Each shell's ``Child``, pty master and closed flag (set by ``C``), by id."""
        self.shells_lock = _thread.allocate_lock()

    def handle(self, raw):
        # type: (bytes) -> None
        rid, _, rest = raw.rstrip(b"\r\n").partition(b" ")
        op, _, arg = rest.partition(b" ")
        if op == b"S":
            self.open_shell(rid, arg)
        elif op in (b"W", b"I", b"C"):
            self.shell_op(rid, op, arg)
        else:
            super().handle(raw)

    def open_shell(self, rid, payload):
        # type: (bytes, bytes) -> None
        """Spawn here (so the writes that follow find it), relay its pty in a thread."""
        import fcntl
        import termios

        args = SUP["json_loads"](binascii.a2b_base64(payload).decode())
        env = args.get("env")
        env = dict(os.environ) if env is None else env
        master, slave = os.openpty()
        try:
            start = shell_start(args["argv"], env, os.ttyname(slave))
            take = None
            if start is None:  # the child takes the terminal and its limits before exec
                start = (args["argv"], None, ())
                take = lambda: _take_tty(fcntl.ioctl, termios.TIOCSCTTY)  # noqa: E731
            argv, executable, keep = start
            proc = start_owned(
                argv, executable, args.get("cwd"), env, slave, slave, slave, take, keep
            )
        except OSError as exc:
            os.close(master)
            msg = ("patchgym: cannot open shell: %s\n" % exc).encode()
            self.send(rid, b"1 " + binascii.b2a_base64(msg, newline=False))
            self.send(rid, b"E")
            return
        finally:
            os.close(slave)
        closed = [False]
        self.shells[rid] = (proc, master, closed)
        _thread.start_new_thread(self.relay, (rid, master, closed))

    def relay(self, rid, master, closed):
        # type: (bytes, int, List[bool]) -> None
        """Forward the pty's output until it ends or the shell is closed.

        Only this thread closes ``master``: were ``C`` to close it while this thread still
        read it, the next shell's ``openpty`` could reuse the number, and this thread would
        forward (steal) the new shell's output under the old shell's id.
        """
        try:
            while not closed[0]:
                try:
                    ready, _, _ = select.select([master], [], [], 0.2)
                    data = os.read(master, 65536) if ready else None
                except OSError:
                    data = b""
                if data is None:
                    continue
                if not data:
                    break
                self.send(rid, b"1 " + binascii.b2a_base64(data, newline=False))
        finally:
            with self.shells_lock:  # no W/I/C of this id can use the number any more
                self.shells.pop(rid, None)
                os.close(master)
        self.send(rid, b"E")

    def shell_op(self, rid, op, arg):
        # type: (bytes, bytes, bytes) -> None
        with self.shells_lock:
            entry = self.shells.get(rid)
            if entry is None:
                return
            if op == b"C":
                del self.shells[rid]
                entry[2][0] = True  # the relay closes the pty when it sees this
            else:
                self._use_shell(entry, op, arg)
                return
        proc = entry[0]
        try:
            os.killpg(proc.pid, SUP["SIGKILL"])
        except OSError:
            pass
        proc.wait()

    def _use_shell(self, entry, op, arg):
        # type: (Tuple[Any, int, List[bool]], bytes, bytes) -> None
        proc, master, _ = entry
        try:
            if op == b"W":
                data = binascii.a2b_base64(arg)
                while data:
                    data = data[os.write(master, data) :]
            elif op == b"I":
                try:
                    pgid = os.tcgetpgrp(master)
                except OSError:  # gVisor: no TIOCGPGRP on a pty master, tpgid reads 0
                    pgid = _newest_job(proc.pid)
                if pgid > 0 and pgid != proc.pid:
                    os.killpg(pgid, SUP["SIGKILL"])
        except OSError:
            pass


def _newest_job(sid):
    # type: (int) -> int
    """The newest process group of session ``sid`` but the shell's own: the job the shell
    waits for (the foreground one) where the terminal cannot say; -1 when there is none."""
    newest = -1
    for name in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % name) as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        pgrp, session = int(fields[2]), int(fields[3])
        if session == sid and pgrp != sid:
            newest = max(newest, pgrp)
    return newest


def find_prctl():
    # type: () -> Any
    """The C library's ``prctl`` as a callable (int and bytes arguments), or None.
    Through ``_ctypes`` alone where it has the three functions this needs (CPython 3.6 to
    3.13 has): importing the ``ctypes`` package costs ~6 ms of every sandbox's start (its
    classes, ``struct``), its C half and one lookup ~0.6 ms. Else through ``ctypes``."""
    try:
        import _ctypes

        main_program = _ctypes.dlopen(None)  # type: ignore[arg-type]  # None: dlopen(NULL)
        call, fn = _ctypes.call_function, _ctypes.dlsym(main_program, "prctl")
        return lambda *args: call(fn, args)
    except Exception:
        pass
    try:
        import ctypes

        return ctypes.CDLL(None).prctl
    except Exception:
        return None


def main():
    # type: () -> None
    global PRCTL
    PRCTL = find_prctl()
    try:
        PRCTL(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
        # started through the loader's memfd (local/oomguard.py), the kernel names this
        # process after the descriptor ("17"): give `ps` and /proc/1/comm Python's name back
        name = os.path.basename(sys.executable).encode()[:15]
        PRCTL(15, name, 0, 0, 0)  # PR_SET_NAME
    except Exception:
        pass
    if os.getpid() == 1:
        # Python's own SIGINT handler would let `kill -INT 1` from inside end the sandbox;
        # the kernel drops a default-action signal sent to a namespace's init from inside
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
        _thread.start_new_thread(reap_orphans, ())
    InitServer().serve()


main()
