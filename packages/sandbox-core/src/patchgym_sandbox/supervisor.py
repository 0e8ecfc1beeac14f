# ruff: noqa: UP031, UP035, RUF005
"""Run one command under a deadline, an idle timeout and a process-tree kill.

This module is deliberately stdlib-only and Python 3.6-compatible: the local backend calls
:func:`supervise` in a worker thread, and remote backends (docker, k8s, e2b) ship this very
file into the sandbox and run it with ``python3 - <args>``, so the deadline is enforced
*inside* the sandbox and every backend has the same semantics.

Tree kill: the command runs in its own session/process group and carries a unique token in
its environment (``PATCHGYM_EXEC``); on a timeout, or when the command exits while
something still holds its output pipes, the group is killed and ``/proc`` is scanned for
any process that inherited the token (which catches children that called ``setsid``).
When ``supervise`` returns, nothing the command started is still running.

Remote wire format (one line per record, text-safe over any transport):
``1 <b64>`` stdout chunk, ``2 <b64>`` stderr chunk, ``D <total> <out> <err>`` bytes
dropped at the source, ``X <json>`` the final status.
"""

import _thread
import binascii
import errno
import os
import select
import sys
import time

try:  # subprocess's C half: its fork and exec without its imports (see ``start_child``)
    import _posixsubprocess
except ImportError:  # not CPython
    _posixsubprocess = None  # type: ignore[assignment]  # the fallback below needs no module
try:  # json's C half (see ``json_loads``)
    import _json
except ImportError:  # not CPython
    _json = None  # type: ignore[assignment]  # the fallback below needs no module

TYPE_CHECKING = False  # typing costs ~2.5 ms of the sandbox's start; mypy reads it anyway
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional, Tuple  # noqa: F401  (type comments)

TOKEN_VAR = "PATCHGYM_EXEC"
TIMEOUT_EXIT_CODE = 124
DRAIN_AFTER_EXIT_S = 0.05
SPAWN_RETRY_S = 2.0
"""How long a spawn refused a process (``EAGAIN``: the sandbox's pids limit) is retried:
the killed leftovers of the last command count until their zombies are reaped (the local
init reaps each as it exits, within 0.2 s)."""
SPAWN_RETRY_PAUSE_S = 0.005
_BASH = {}  # type: Dict[str, str]
"""Where ``bash`` is, per ``PATH`` value (see :func:`_bash`)."""
_DEVNULL = []  # type: List[int]
_DEVNULL_LOCK = _thread.allocate_lock()
KILL_WAIT_S = 10.0
"""The longest a tree kill waits for what it killed to be dead (see :func:`kill_tree`)."""
SIGKILL = 9
"""Linux's SIGKILL (``signal`` imports ``enum``: ~4 ms of a sandbox's start)."""


def _pids_with_token(var, token, pgid=None):
    # type: (str, str, Optional[int]) -> List[int]
    """The processes carrying ``var=token``, and with ``pgid`` those of that process
    group not yet dead: a killed process's ``environ`` reads empty from the moment its
    memory is released, while it still exits (``R``/``D`` in its ``stat``; gVisor can take
    milliseconds there under load), so the token alone would let it be counted gone."""
    needle = ("%s=%s" % (var, token)).encode()
    found = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as fh:
                env = fh.read()
        except OSError:
            env = b""
        if needle in env.split(b"\0") or (pgid is not None and _dying_in(int(name), pgid)):
            found.append(int(name))
    return found


def _read_stat(pid):
    # type: (int) -> Optional[bytes]
    """``/proc/<pid>/stat``, None if it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def _live_stat(pid):
    # type: (int) -> Optional[List[bytes]]
    """``pid``'s ``stat`` fields from its state on (the 3rd), None once it is a zombie or gone."""
    raw = _read_stat(pid)
    if raw is None:
        return None
    f = raw[raw.rfind(b")") + 2 :].split()
    return f if len(f) > 19 and f[0] not in (b"Z", b"X") else None


def _dying_in(pid, pgid):
    # type: (int, int) -> bool
    """Whether ``pid`` is in process group ``pgid`` and not a zombie yet."""
    f = _live_stat(pid)
    return f is not None and int(f[2]) == pgid


def kill_tree(pgid, var, token):
    # type: (Optional[int], str, str) -> int
    """SIGKILL the process group and every process carrying the token; returns survivors.

    Each scan comes before the kills it leads to, so a process is found while its
    ``environ`` still reads (the command's group, killed before the first scan, is found by
    its group id), and the kill waits for every process it found until that one
    is a zombie or gone (a killed process can take a long moment to get there: gVisor's
    Sentry under load, a task in ``D``). Done once nothing found is left and two scans in a
    row, 10 ms apart, found nothing (a process caught in ``execve`` is missed by one scan,
    seldom by two), or after ``KILL_WAIT_S`` (a task stuck in ``D`` for good): a bound in
    time, not in scans, which a loaded machine stretches."""
    found = {}  # type: Dict[int, Optional[bytes]]
    killed = False
    empty = 0
    deadline = time.monotonic() + KILL_WAIT_S
    while True:
        pids = _pids_with_token(var, token, pgid)
        for pid in pids:
            if pid not in found:
                found[pid] = _start_time(pid)
        if pgid is not None:
            try:
                os.killpg(pgid, SIGKILL)
            except OSError:
                pass
        for pid in pids:
            try:
                os.kill(pid, SIGKILL)
                killed = True
            except OSError:
                pass
        # a zombie, gone, or its pid since taken by another process: no longer waited for
        found = {p: t for p, t in found.items() if t is not None and _start_time(p) == t}
        empty = 0 if pids or found else empty + 1
        if empty >= (2 if killed else 1):
            return 0
        if time.monotonic() > deadline:
            return len(set(found).union(_pids_with_token(var, token)))
        time.sleep(0.01)


def _start_time(pid):
    # type: (int) -> Optional[bytes]
    """``pid``'s start time (its ``stat``'s 22nd field), None once it is a zombie or gone."""
    f = _live_stat(pid)
    return None if f is None else f[19]


def _stat(pid):
    # type: (int) -> Optional[Tuple[str, int, int, int, int]]
    """``(comm, ppid, pgrp, tty_nr, tpgid)`` from ``/proc/<pid>/stat``, None if it is gone."""
    data = _read_stat(pid)
    if data is None:
        return None
    raw = data.decode("utf-8", "replace")
    comm = raw[raw.find("(") + 1 : raw.rfind(")")]
    f = raw[raw.rfind(")") + 2 :].split()
    return comm, int(f[1]), int(f[2]), int(f[4]), int(f[5])


def kill_foreground(var, token):
    # type: (str, str) -> int
    """SIGKILL the foreground job of every interactive shell carrying ``var=token``.

    The shell is the outermost ``bash`` with the token (its parent is not a ``bash`` with
    it); the terminal's foreground group (``tpgid``) is killed when it is not the shell's
    own. Signals a job ignores (``trap '' INT QUIT``, inherited SIG_IGN) do not matter.
    Returns the number of groups killed.
    """
    procs = {}  # type: Dict[int, Tuple[str, int, int, int, int]]
    for pid in _pids_with_token(var, token):
        st = _stat(pid)
        if st is not None:
            procs[pid] = st
    mine = os.getpgrp()
    killed = 0
    for comm, ppid, pgrp, tty, tpgid in procs.values():
        parent = procs.get(ppid)
        if comm != "bash" or (parent is not None and parent[0] == "bash"):
            continue
        if tty == 0 or tpgid <= 1 or tpgid in (pgrp, mine):
            continue
        try:
            os.killpg(tpgid, SIGKILL)
            killed += 1
        except OSError:
            pass
    return killed


class _JsonContext:
    """What ``_json``'s scanner reads of a decoder: ``json.loads``'s defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity, -Infinity


_SCANNER = []  # type: List[Any]


def json_loads(text):
    # type: (str) -> Any
    """``json.loads(text)`` through ``_json``'s scanner alone: the ``json`` package imports
    ``re`` and ``enum`` (~10 ms of every sandbox's start) for what its C half does. Raises
    ``ValueError`` on anything but one JSON value (whitespace around it aside)."""
    if _json is None:
        import json

        return json.loads(text)
    if not _SCANNER:
        _SCANNER.append(_json.make_scanner(_JsonContext()))  # type: ignore[arg-type]  # the C scanner reads only these attributes
    text = text.strip(" \t\n\r")
    try:
        value, end = _SCANNER[0](text, 0)
    except StopIteration:
        raise ValueError("not JSON: %r" % text[:80]) from None
    if end != len(text):
        raise ValueError("not JSON: extra data at character %d of %r" % (end, text[:80]))
    return value


def json_dumps(obj):
    # type: (Dict[str, Any]) -> str
    """``json.dumps(obj)`` of a flat object (str keys; str, int, float, bool or None
    values, as a status is), without the ``json`` package (see :func:`json_loads`)."""
    items = []
    for key, value in obj.items():
        items.append("%s: %s" % (_json_scalar(key), _json_scalar(value)))
    return "{" + ", ".join(items) + "}"


def _json_scalar(value):
    # type: (Any) -> str
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return "%d" % value
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    if isinstance(value, str):
        if _json is None:
            import json

            return json.dumps(value)
        return _json.encode_basestring_ascii(value)
    raise TypeError("not a JSON scalar: %r" % (value,))


class _Limits:
    """The deadline and the idle timeout of one command; output pushes the idle one back."""

    def __init__(self, start, timeout, idle_timeout):
        # type: (float, Optional[float], Optional[float]) -> None
        self.deadline = start + timeout if timeout else None  # type: Optional[float]
        self.idle_timeout = idle_timeout
        self.last_output = start

    def remaining(self, now):
        # type: (float) -> List[float]
        """Seconds left before each limit that applies (empty when none does)."""
        left = []  # type: List[float]
        if self.deadline is not None:
            left.append(self.deadline - now)
        if self.idle_timeout:
            left.append(self.last_output + self.idle_timeout - now)
        return left

    def expired(self, now):
        # type: (float) -> str
        """The status flag of the limit that ran out: the deadline wins, else the idle one."""
        if self.deadline is not None and now >= self.deadline:
            return "timed_out"
        return "idle_timed_out"


class WaitTimeout(Exception):
    """:meth:`Child.wait` ran out of time (the command still runs)."""


class Child:
    """A started command: its pid, :meth:`poll` and :meth:`wait`, what ``supervise`` needs
    of ``subprocess.Popen`` without importing ``subprocess`` (with the ``re``, ``enum``,
    ``threading``, ``locale`` and ``selectors`` it pulls in: ~12 ms of every sandbox's
    start). ``popen``: the ``subprocess.Popen`` it wraps where ``_posixsubprocess`` could
    not be used (see :func:`start_child`)."""

    def __init__(self, pid, popen=None):
        # type: (int, Any) -> None
        self.pid = pid
        self.popen = popen
        self.returncode = None  # type: Optional[int]

    def poll(self):
        # type: () -> Optional[int]
        """The exit code (``-N`` for signal ``N``, as ``Popen``), None while it runs."""
        return self._reap(False)

    def wait(self, timeout=None):
        # type: (Optional[float]) -> int
        """The exit code once it ended; :class:`WaitTimeout` after ``timeout`` seconds.

        Woken by the exit on a pidfd (rechecked every 50 ms, in case a kernel never wakes
        it); where this kernel or Python has none, polled as ``Popen.wait`` polls: from
        0.5 ms, doubling up to 50 ms."""
        if timeout is None:
            return self._reap(True)  # type: ignore[return-value]  # a blocking reap always has a code
        deadline = time.monotonic() + timeout
        pidfd = None  # type: Optional[int]  # opened at the first miss: -1 where there is none
        delay = 0.0005
        try:
            while self._reap(False) is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WaitTimeout()
                if pidfd is None:
                    pidfd = self._pidfd()
                if pidfd >= 0:
                    select.select([pidfd], [], [], min(left, 0.05))
                else:
                    delay = min(delay * 2, left, 0.05)
                    time.sleep(delay)
        finally:
            if pidfd is not None and pidfd >= 0:
                os.close(pidfd)
        return self.returncode  # type: ignore[return-value]  # set by the reap above

    def _pidfd(self):
        # type: () -> int
        """A pidfd of the command, or -1 (a ``Popen`` child, Python < 3.9, a kernel or
        sandbox without ``pidfd_open``)."""
        if self.popen is not None:
            return -1
        try:
            return os.pidfd_open(self.pid)  # AttributeError before Python 3.9
        except (AttributeError, OSError):
            return -1

    def _reap(self, block):
        # type: (bool) -> Optional[int]
        if self.returncode is not None:
            return self.returncode
        if self.popen is not None:
            self.returncode = self.popen.wait() if block else self.popen.poll()
            return self.returncode
        try:
            pid, sts = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:  # reaped by someone else: its code is lost
            pid, sts = self.pid, 0
        if pid == self.pid:
            self.returncode = -os.WTERMSIG(sts) if os.WIFSIGNALED(sts) else os.WEXITSTATUS(sts)
        return self.returncode


def _fork_exec_extra():
    # type: () -> Optional[Tuple[Tuple[Any, ...], Tuple[Any, ...]]]
    """The arguments ``_posixsubprocess.fork_exec`` of this Python takes after
    ``start_new_session`` and after ``preexec_fn`` (each release of 3.6 to 3.13 has its own
    signature, as ``subprocess`` passes them); None for any other Python (``subprocess``
    is used there)."""
    v = sys.version_info[:2]
    if _posixsubprocess is None or not (3, 6) <= v <= (3, 13):
        return None
    if v <= (3, 8):
        return (), ()
    if v <= (3, 10):  # gid, extra_groups, uid, umask
        return (None, None, None, -1), ()
    return (-1, None, None, None, -1), (True,)  # process_group first; allow_vfork after


_FORK_EXEC = [_fork_exec_extra()]


def start_child(argv, executable, cwd, env, stdin, stdout, stderr, preexec_fn=None, keep_fds=()):
    # type: (List[str], Optional[str], Optional[str], Dict[str, str], int, int, int, Optional[Callable[[], None]], Tuple[int, ...]) -> Child
    """Start ``argv`` in a session of its own with descriptors ``stdin``, ``stdout`` and
    ``stderr`` as its 0, 1 and 2 and no other (but ``keep_fds``, each under its own number),
    as ``subprocess.Popen(start_new_session=True, close_fds=True, pass_fds=keep_fds)``
    starts it, through the same C function (``vfork`` where that Python would use it); a
    failure to start it raises the same ``OSError``. ``executable``: the program to run
    (None: ``argv[0]`` looked up on the ``PATH`` of ``env``)."""
    extra = _FORK_EXEC[0]
    if extra is None:
        return _start_popen(argv, executable, cwd, env, stdin, stdout, stderr, preexec_fn, keep_fds)
    program = executable or argv[0]
    if "/" in program:
        programs = [os.fsencode(program)]
    else:
        path = env.get("PATH", os.defpath).split(os.pathsep)
        programs = [os.fsencode(os.path.join(d or ".", program)) for d in path]
    env_list = []
    for k, v in env.items():
        if "=" in k:
            raise ValueError("illegal environment variable name: %r" % k)
        env_list.append(os.fsencode(k) + b"=" + os.fsencode(v))
    err_r, err_w = os.pipe()
    low = []
    while err_w < 3:  # never one of the descriptors the child's 0-2 are made from
        low.append(err_w)
        err_w = os.dup(err_w)
    try:
        keep = tuple(sorted(set((err_w,) + tuple(keep_fds))))
        args = (argv, programs, True, keep, cwd, env_list, stdin, -1, -1, stdout, -1, stderr,
                err_r, err_w, True, True) + extra[0] + (preexec_fn,) + extra[1]  # fmt: skip
        try:
            pid = _posixsubprocess.fork_exec(*args)
        except TypeError:  # a build whose signature differs: subprocess knows it
            _FORK_EXEC[0] = None
            return _start_popen(
                argv, executable, cwd, env, stdin, stdout, stderr, preexec_fn, keep_fds
            )
    finally:
        for fd in low + [err_w]:
            os.close(fd)
    try:
        data = b""
        while len(data) < 50000:
            part = os.read(err_r, 50000)
            if not part:
                break
            data += part
    finally:
        os.close(err_r)
    if data:
        Child(pid).wait()
        _raise_child_error(data, cwd, program)
    return Child(pid)


def _raise_child_error(data, cwd, program):
    # type: (bytes, Optional[str], str) -> None
    """The child's report of why it did not start (``<exception>:<hex errno>:<what>``, as
    ``_posixsubprocess`` writes it) raised as ``subprocess`` raises it."""
    name, _, rest = data.partition(b":")
    hex_errno, _, what = rest.partition(b":")
    msg = what.decode("utf-8", "replace")
    if name == b"OSError" and hex_errno:
        code = int(hex_errno, 16)
        filename = cwd if msg.startswith("noexec") else program
        raise OSError(code, os.strerror(code) if code else msg, filename)
    raise RuntimeError("cannot start %s: %s" % (program, msg or repr(data[:200])))


def _start_popen(argv, executable, cwd, env, stdin, stdout, stderr, preexec_fn, keep_fds=()):
    # type: (List[str], Optional[str], Optional[str], Dict[str, str], int, int, int, Optional[Callable[[], None]], Tuple[int, ...]) -> Child
    """:func:`start_child` through ``subprocess`` (a Python whose ``fork_exec`` is not known)."""
    import subprocess

    popen = subprocess.Popen(
        argv,
        executable=executable,
        cwd=cwd,
        env=env,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        preexec_fn=preexec_fn,
        pass_fds=keep_fds,
    )
    return Child(popen.pid, popen)


def _spawn(
    cmd,  # type: str
    env,  # type: Dict[str, str]
    cwd,  # type: Optional[str]
    stdin,  # type: Optional[bytes]
    preexec_fn,  # type: Optional[Callable[[], None]]
    argv_prefix,  # type: Tuple[str, ...]
    on_spawn,  # type: Optional[Callable[[], None]]
    keep_fds=(),  # type: Tuple[int, ...]
):
    # type: (...) -> Tuple[Child, int, int]
    """Start ``bash -c cmd`` in a session (and process group) of its own, stdin fed by a thread;
    returns it with the read ends of its stdout and stderr pipes (plain descriptors: no file
    objects to set up and tear down). ``env`` (the caller's copy, changed in place) gets
    ``SHELL``, the bash that runs the command, where it has none: a bash started without
    it reads the user database for it, about 20 system calls of every command's start
    (and of every bash the command starts). A spawn the pids limit refuses is retried for
    :data:`SPAWN_RETRY_S`. ``on_spawn`` is called once it started, and before each wait
    for a retry.

    ``start_child`` is looked up at call time: the local namespace init swaps in its own,
    which registers the child so that its reaper leaves it alone.
    """
    deadline = time.monotonic() + SPAWN_RETRY_S
    path = env.get("PATH", os.defpath)
    bash = None if argv_prefix else _bash(path)
    if bash is not None and "SHELL" not in env:
        env["SHELL"] = bash
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe() if stdin is not None else (_devnull(), -1)
    try:
        while True:
            try:
                proc = start_child(
                    list(argv_prefix) + ["bash", "-c", cmd], bash, cwd, env, in_r, out_w, err_w,
                    preexec_fn, keep_fds,
                )  # fmt: skip
                break
            except OSError as exc:
                if bash is not None and exc.errno in (errno.ENOENT, errno.EACCES, errno.ENOTDIR):
                    _BASH.pop(path, None)  # gone since it was found: look it up again
                    bash = None
                    continue
                if exc.errno != errno.EAGAIN or time.monotonic() > deadline:
                    raise
                if on_spawn is not None:
                    on_spawn()
                time.sleep(SPAWN_RETRY_PAUSE_S)
    except BaseException:
        os.close(out_r)
        os.close(err_r)
        if in_w >= 0:
            os.close(in_w)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
        if in_w >= 0:
            os.close(in_r)
    if on_spawn is not None:
        on_spawn()
    if stdin is not None:
        _thread.start_new_thread(_feed, (in_w, stdin))
    return proc, out_r, err_r


def _bash(path):
    # type: (str) -> Optional[str]
    """The ``bash`` that ``PATH`` value ``path`` finds, looked up once and then remembered,
    as a shell hashes command locations (a spawn that no longer finds it looks again):
    ``execvpe`` would otherwise try every directory before it, each try a failed
    ``execve`` (about 0.1 ms a command with ten directories). None where a relative
    directory comes first (it depends on the command's ``cwd``) or none has it."""
    found = _BASH.get(path)
    if found is not None:
        return found
    for d in path.split(os.pathsep):
        if not d.startswith("/"):
            return None
        candidate = os.path.join(d, "bash")
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            _BASH[path] = candidate
            return candidate
    return None


def _devnull():
    # type: () -> int
    """A descriptor of ``/dev/null`` for the commands' stdin, opened once (close-on-exec;
    ``subprocess.DEVNULL`` opens and closes one per command)."""
    with _DEVNULL_LOCK:
        if not _DEVNULL:
            _DEVNULL.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
        return _DEVNULL[0]


def _feed(fd, data):
    # type: (int, bytes) -> None
    """Write ``data`` to the command's stdin and close it; a command that stops reading
    (or exits) early is not an error. Runs in a thread so a full pipe never blocks output."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        pass
    finally:
        os.close(fd)


class _Pipes:
    """The command's stdout and stderr under one ``poll``, each keyed by its stream number
    (``poll``: unlike ``epoll`` it costs no descriptor and no system call to set up).
    :attr:`open` maps each pipe not yet at its end to its stream."""

    def __init__(self, out_r, err_r):
        # type: (int, int) -> None
        self.poll = select.poll()
        self.open = {out_r: 1, err_r: 2}
        for fd in self.open:
            self.poll.register(fd, select.POLLIN)

    def ready(self, wait):
        # type: (float) -> List[int]
        """The pipes with something to read (or at their end), after up to ``wait`` s."""
        return [fd for fd, _ in self.poll.poll(max(0, int(wait * 1000 + 0.999)))]

    def close(self, fd):
        # type: (int) -> None
        """``fd`` reached its end."""
        self.poll.unregister(fd)
        del self.open[fd]


def _pump(
    proc,  # type: Child
    pipes,  # type: _Pipes
    on_chunk,  # type: Callable[[int, bytes], None]
    limits,  # type: _Limits
):
    # type: (...) -> Optional[str]
    """Forward output until both pipes close, until a short drain after the command exits
    (something it left behind may hold the pipes), or until a limit runs out.

    Returns the status flag of the expired limit, or None. A pipe leaves ``pipes.open`` at
    its end of file.
    """
    exited_at = None  # type: Optional[float]
    while pipes.open:
        now = time.monotonic()
        waits = [1.0] + limits.remaining(now)
        if exited_at is not None:
            waits.append(exited_at + DRAIN_AFTER_EXIT_S - now)
        wait = min(waits)
        if wait <= 0:
            if exited_at is not None and now >= exited_at + DRAIN_AFTER_EXIT_S:
                return None
            return limits.expired(now)
        _forward_ready(pipes, wait, on_chunk, limits)
        if exited_at is None and proc.poll() is not None:
            exited_at = time.monotonic()
    return None


def _forward_ready(pipes, wait, on_chunk, limits):
    # type: (_Pipes, float, Callable[[int, bytes], None], _Limits) -> None
    """Wait up to ``wait`` seconds, then pass on one read from each ready pipe."""
    for fd in pipes.ready(wait):
        data = os.read(fd, 65536)
        if not data:
            pipes.close(fd)
            continue
        limits.last_output = time.monotonic()
        on_chunk(pipes.open[fd], data)


def _wait_after_output(proc, limits):
    # type: (Child, _Limits) -> Optional[str]
    """The pipes closed but the command may still run (``exec >&- 2>&-; sleep``): the
    deadline and the idle timeout keep counting. Returns the expired limit's flag, or None."""
    left = limits.remaining(time.monotonic())
    try:
        proc.wait(timeout=max(0.0, min(left)) if left else None)
    except WaitTimeout:
        return limits.expired(time.monotonic())
    return None


def _kill_leftovers(pgid, token, forced):
    # type: (int, str, bool) -> int
    """Kill anything left in the group (or escaped from it) and wait until it is gone;
    returns how many were still alive after ``KILL_WAIT_S`` (see :func:`kill_tree`).

    The common case (nothing left, not ``forced`` by a timeout or a pipe still held) costs
    one failed ``killpg`` and no ``/proc`` scan.
    """
    try:
        os.killpg(pgid, SIGKILL)
        leftovers = True
    except OSError:
        leftovers = False
    if leftovers or forced:
        return kill_tree(pgid, TOKEN_VAR, token)
    return 0


def _read_buffered(pipes, on_chunk):
    # type: (_Pipes, Callable[[int, bytes], None]) -> None
    """Pass on what was already buffered in the pipes still open before the kill."""
    for fd, stream in list(pipes.open.items()):
        try:
            os.set_blocking(fd, False)
            while True:
                data = os.read(fd, 65536)
                if not data:
                    break
                on_chunk(stream, data)
        except OSError:
            pass


def _final_status(code, expired, start):
    # type: (int, Optional[str], float) -> Dict[str, object]
    """The final status: a timeout exits 124, a signal ``N`` exits ``128 + N`` (as in bash)."""
    if expired:
        code = TIMEOUT_EXIT_CODE
    elif code < 0:
        code = 128 - code
    return {
        "exit_code": code,
        "timed_out": expired == "timed_out",
        "idle_timed_out": expired == "idle_timed_out",
        "duration_s": time.monotonic() - start,
    }


def supervise(
    cmd,  # type: str
    on_chunk,  # type: Callable[[int, bytes], None]
    cwd=None,  # type: Optional[str]
    env=None,  # type: Optional[Dict[str, str]]
    timeout=None,  # type: Optional[float]
    idle_timeout=None,  # type: Optional[float]
    stdin=None,  # type: Optional[bytes]
    preexec_fn=None,  # type: Optional[Callable[[], None]]
    argv_prefix=(),  # type: Tuple[str, ...]
    token=None,  # type: Optional[str]
    on_spawn=None,  # type: Optional[Callable[[], None]]
    keep_fds=(),  # type: Tuple[int, ...]
):
    # type: (...) -> Dict[str, object]
    """Run ``bash -c cmd``; stream chunks to ``on_chunk(1|2, data)``; return the status.

    In order: spawn the command, pass its output on until its pipes close or a limit runs
    out, keep its limits while it runs on without output pipes, kill whatever is left of its
    tree, pass on what the pipes still buffered, and report how it ended.
    """
    token = token or os.urandom(16).hex()  # not uuid: its import costs ~2 ms
    full_env = dict(os.environ if env is None else env)
    full_env[TOKEN_VAR] = token
    start = time.monotonic()
    proc, out_r, err_r = _spawn(
        cmd, full_env, cwd, stdin, preexec_fn, argv_prefix, on_spawn, keep_fds
    )
    limits = _Limits(start, timeout, idle_timeout)
    pipes = _Pipes(out_r, err_r)
    expired = _pump(proc, pipes, on_chunk, limits)
    if expired is None and not pipes.open:
        expired = _wait_after_output(proc, limits)
    unkilled = _kill_leftovers(proc.pid, token, forced=expired is not None or bool(pipes.open))
    _read_buffered(pipes, on_chunk)
    os.close(out_r)
    os.close(err_r)
    status = _final_status(proc.wait(), expired, start)
    if unkilled:  # absent in the common case: the status line stays as it was
        status["unkilled"] = unkilled
    return status


def _main():
    # type: () -> None
    """Remote entry: ``python3 - <b64 json args>`` with this file on stdin, or a path."""
    args = json_loads(binascii.a2b_base64(sys.argv[1]).decode())
    cap = int(args.get("cap", 1 << 20))
    out = sys.stdout.buffer
    state = {"sent": 0, "tail": [], "tail_bytes": 0, "dropped": [0, 0, 0]}

    def emit(stream, data):
        # type: (int, bytes) -> None
        out.write(b"%d %s\n" % (stream, binascii.b2a_base64(data, newline=False)))
        out.flush()

    def on_chunk(stream, data):
        # type: (int, bytes) -> None
        room = cap - state["sent"]  # type: ignore[operator]  # state mixes ints and lists (stdlib-only code, typed by comments)
        if room > 0:
            head, data = data[:room], data[room:]
            state["sent"] += len(head)  # type: ignore[operator]  # state mixes ints and lists (stdlib-only code, typed by comments)
            emit(stream, head)
        if not data:
            return
        tail = state["tail"]  # type: List[Tuple[int, bytes]]  # type: ignore[assignment]  # state mixes ints and lists (stdlib-only code, typed by comments)
        tail.append((stream, data))
        state["tail_bytes"] += len(data)  # type: ignore[operator]  # state mixes ints and lists (stdlib-only code, typed by comments)
        while state["tail_bytes"] > cap // 2 and tail:  # type: ignore[operator]  # state mixes ints and lists (stdlib-only code, typed by comments)
            s, d = tail[0]
            excess = state["tail_bytes"] - cap // 2  # type: ignore[operator]  # state mixes ints and lists (stdlib-only code, typed by comments)
            cut = min(excess, len(d))
            state["dropped"][0] += cut  # type: ignore[index]  # state mixes ints and lists (stdlib-only code, typed by comments)
            state["dropped"][s] += cut  # type: ignore[index]  # state mixes ints and lists (stdlib-only code, typed by comments)
            state["tail_bytes"] -= cut  # type: ignore[operator]  # state mixes ints and lists (stdlib-only code, typed by comments)
            if cut == len(d):
                tail.pop(0)
            else:
                tail[0] = (s, d[cut:])

    stdin = binascii.a2b_base64(args["stdin"]) if args.get("stdin") is not None else None
    env = dict(os.environ)
    env.update(args.get("env") or {})
    try:
        status = supervise(
            args["cmd"],
            on_chunk,
            cwd=args.get("cwd"),
            env=env,
            timeout=args.get("timeout"),
            idle_timeout=args.get("idle_timeout"),
            stdin=stdin,
        )
    except OSError as exc:  # e.g. the cwd does not exist
        msg = ("patchgym: cannot run command: %s\n" % exc).encode()
        emit(2, msg)
        status = {"exit_code": 127, "timed_out": False, "idle_timed_out": False, "duration_s": 0.0}
    d = state["dropped"]
    if d[0]:  # type: ignore[index]  # state mixes ints and lists (stdlib-only code, typed by comments)
        out.write(b"D %d %d %d\n" % (d[0], d[1], d[2]))  # type: ignore[index]  # state mixes ints and lists (stdlib-only code, typed by comments)
    for s, data in state["tail"]:  # type: ignore[attr-defined]  # state mixes ints and lists (stdlib-only code, typed by comments)
        emit(s, data)
    out.write(b"X " + json_dumps(status).encode() + b"\n")
    out.flush()


if __name__ == "__main__":
    _main()
