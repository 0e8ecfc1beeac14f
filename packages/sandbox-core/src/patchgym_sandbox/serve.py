# patchgym exec server
# ruff: noqa: UP031, UP035
"""In-sandbox exec server: many supervised commands over one long-lived process.

The one server loop every remote backend runs inside its sandbox (docker through an
attached ``docker exec``, k8s through one exec stream, ags/e2b through envd with a stdin
pipe). Stdlib only, Python 3.6+, like ``supervisor.py`` whose ``supervise`` (deadline,
idle timeout, tree kill) runs each request in a thread, capped at the source exactly as
the one-shot supervisor caps.

Run as ``python3 -I -S serve.py <supervisor>`` or ``python3 -I -S -c <this source>
<supervisor>``; ``<supervisor>`` is the supervisor's source (it holds a newline) or the
path of a file that holds it.

Wire format, one line each way, ``<rid>`` a client-chosen token without spaces:
  in:  ``<rid> R <b64 json request>``  (``patchgym_sandbox.remote.encode_request``)
       ``<rid> K <var> <token>``       kill every process whose environment has var=token
       ``<rid> F <var> <token>``       kill the foreground job of the interactive shell
                                       whose environment has var=token (a session's
                                       interrupt past Ctrl-C), then answer ``<rid> X``:
                                       the shell is typed to only once the job is dead
  out: ``- READY <pid>``               once, when the server is up
       ``<rid> <supervisor frame>``    (``1 <b64>``, ``2 <b64>``, ``D ...``, ``X <json>``)
When stdin closes (the client went away) every running command is killed and it exits.
"""

import _thread
import binascii
import os
import sys

TYPE_CHECKING = False  # typing costs ~2.5 ms of the sandbox's start; mypy reads it anyway
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Set, Tuple  # noqa: F401 (type comments, Python 3.6)

TAG_VAR = "PATCHGYM_SERVER_REQ"
"""Every command of request ``rid`` carries ``PATCHGYM_SERVER_REQ=rid`` (for the kill on EOF)."""


class Capper:
    """The supervisor's output cap at the source: the first ``cap`` bytes go out at once,
    the last ``cap // 2`` are held back and sent at the end, the middle is counted."""

    def __init__(self, send, cap):
        # type: (Callable[[bytes], None], int) -> None
        self.send = send
        self.cap = cap
        self.sent = 0
        self.tail = []  # type: List[Tuple[int, bytes]]
        self.tail_bytes = 0
        self.dropped = [0, 0, 0]  # type: List[int]

    def emit(self, stream, data):
        # type: (int, bytes) -> None
        self.send(b"%d %s" % (stream, binascii.b2a_base64(data, newline=False)))

    def on_chunk(self, stream, data):
        # type: (int, bytes) -> None
        room = self.cap - self.sent
        if room > 0:
            head, data = data[:room], data[room:]
            self.sent += len(head)
            self.emit(stream, head)
        if not data:
            return
        self.tail.append((stream, data))
        self.tail_bytes += len(data)
        while self.tail_bytes > self.cap // 2 and self.tail:
            s, d = self.tail[0]
            cut = min(self.tail_bytes - self.cap // 2, len(d))
            self.dropped[0] += cut
            self.dropped[s] += cut
            self.tail_bytes -= cut
            if cut == len(d):
                self.tail.pop(0)
            else:
                self.tail[0] = (s, d[cut:])

    def finish(self):
        # type: () -> None
        d = self.dropped
        if d[0]:
            self.send(b"D %d %d %d" % (d[0], d[1], d[2]))
        for s, data in self.tail:
            self.emit(s, data)


def _status(code):
    # type: (int) -> Dict[str, Any]
    return {"exit_code": code, "timed_out": False, "idle_timed_out": False, "duration_s": 0.0}


class Server:
    """Reads requests from ``inp``, runs each in a thread, writes tagged frames to ``out``.

    Leader/follower: the threads take turns reading ``inp`` (one at a time, under
    ``read_lock``), and the one that read a request runs it itself while the next one
    reads on, so a command starts without waking another thread (a hand-off costs it a
    thread wake-up and a GIL hand-over). A thread that finished its request goes back to
    waiting for its turn; one is started only when no other is left to read, so requests
    (and kills) never wait for each other. Whichever thread reads the end of ``inp`` kills
    every running command; :meth:`serve` (the main thread, which only waits) then returns.
    """

    def __init__(self, sup, inp, out):
        # type: (Dict[str, Any], Any, Any) -> None
        self.supervise = sup["supervise"]
        self.loads = sup["json_loads"]
        self.dumps = sup["json_dumps"]
        self.kill_tree = sup["kill_tree"]
        self.kill_foreground = sup["kill_foreground"]
        self.inp = inp
        self.out = out
        self.lock = _thread.allocate_lock()
        self.read_lock = _thread.allocate_lock()
        self.ended = False
        """``inp`` reached its end (set under ``read_lock``)."""
        self.environ = dict(os.environ)
        """The commands' base environment, as a plain dict (``os.environ`` decodes every
        item on each copy)."""
        self.running = set()  # type: Set[bytes]
        self.running_lock = _thread.allocate_lock()
        self.readers = 1
        """Threads not running a request: reading or waiting to (guarded by ``running_lock``;
        the first one, started by :meth:`serve`, counts from the start)."""
        self.done = _thread.allocate_lock()
        """Released once ``inp`` ended and the commands were killed: :meth:`serve`, which
        waits to take it, returns (no ``threading``: ~4 ms of a sandbox's start)."""
        self.done.acquire()

    def send(self, rid, line):
        # type: (bytes, bytes) -> None
        with self.lock:
            try:
                self.out.write(rid + b" " + line + b"\n")
                self.out.flush()
            except (OSError, ValueError):  # the client went away: the end of inp follows
                pass

    def run(self, rid, payload, pass_turn):
        # type: (bytes, bytes, Callable[[], None]) -> None
        """Run request ``rid``; ``pass_turn`` (idempotent) is called once its command
        started, or could not, and counts this thread as a reader again before its status
        goes out (the client's next request may be read by another thread first)."""
        capper = Capper(lambda line: self.send(rid, line), 1 << 20)
        try:
            args = self.loads(binascii.a2b_base64(payload).decode())
            capper.cap = int(args.get("cap", 1 << 20))
            stdin = binascii.a2b_base64(args["stdin"]) if args.get("stdin") is not None else None
            env = dict(self.environ)
            env.update(args.get("env") or {})
            env[TAG_VAR] = rid.decode()
            status = self.supervise(
                args["cmd"],
                capper.on_chunk,
                cwd=args.get("cwd"),
                env=env,
                timeout=args.get("timeout"),
                idle_timeout=args.get("idle_timeout"),
                stdin=stdin,
                on_spawn=pass_turn,
            )
        except OSError as exc:  # e.g. the cwd does not exist
            capper.emit(2, ("patchgym: cannot run command: %s\n" % exc).encode())
            status = _status(127)
        except Exception as exc:  # never leave the client waiting without a status
            capper.emit(2, ("patchgym: exec server error: %r\n" % (exc,)).encode())
            status = _status(126)
        pass_turn()
        capper.finish()
        with self.running_lock:
            self.running.discard(rid)
            self.readers += 1
        self.send(rid, b"X " + self.dumps(status).encode())

    def follow(self):
        # type: () -> None
        """A reading thread's life: wait for the turn, read one line, handle it (an ``R``
        runs here, see :meth:`take`). The thread that reads the end of ``inp`` kills what
        runs and ends the server."""
        while True:
            self.read_lock.acquire()
            job = None
            try:
                raw = b"" if self.ended else self.readline()
                if not raw:
                    if not self.ended:
                        self.ended = True
                        self.kill_running()
                        self.done.release()
                    return
                try:
                    job = self.take(raw)
                except Exception as exc:  # one bad line must not leave the rest unread
                    sys.stderr.write("patchgym: exec server: line %r: %r\n" % (raw[:80], exc))
            finally:
                if job is None:
                    self.read_lock.release()
            if job is not None:
                self.run(*job)

    def readline(self):
        # type: () -> bytes
        """The next line of ``inp``; empty at its end (or once it broke)."""
        try:
            return self.inp.readline()  # type: ignore[no-any-return]  # inp is any binary stream
        except (OSError, ValueError):
            return b""

    def take(self, raw):
        # type: (bytes) -> Any
        """A line read in the turn: an ``R`` comes back as ``(rid, payload, pass_turn)`` to
        run, still holding the turn, which passes on once its command started (a thread is
        started then to take it if none is left: the command runs meanwhile, and the next
        reader takes the interpreter's lock while this thread waits for the command, not
        while it spawns it); any other line is handled here (None)."""
        rid, _, rest = raw.partition(b" ")
        if not rest.startswith(b"R "):
            self.handle(raw)
            return None
        with self.running_lock:
            self.running.add(rid)
            self.readers -= 1
            spare = self.readers > 0
            self.readers += not spare
        return rid, rest[2:].rstrip(b"\r\n"), self.turn_passer(spare)

    def turn_passer(self, spare):
        # type: (bool) -> Callable[[], None]
        """The reading turn's hand-over for a request: once, release the turn and, without
        a ``spare`` thread waiting for it, start one."""
        held = [True]

        def pass_turn():
            # type: () -> None
            if not held[0]:
                return
            held[0] = False
            self.read_lock.release()
            if not spare:
                _thread.start_new_thread(self.follow, ())

        return pass_turn

    def handle(self, raw):
        # type: (bytes) -> None
        """A line other than ``R``, in the reading turn."""
        rid, _, rest = raw.rstrip(b"\r\n").partition(b" ")
        op, _, arg = rest.partition(b" ")
        if op in (b"K", b"F"):
            var, _, token = arg.partition(b" ")
            args = (var.decode(), token.decode())  # type: Tuple[Any, ...]
            if op == b"K":
                target, args = self.kill_tree, (None, *args)
            else:
                target, args = self.kill_foreground_for, (rid, *args)
            _thread.start_new_thread(target, args)

    def kill_foreground_for(self, rid, var, token):
        # type: (bytes, str, str) -> None
        """The ``F`` line: kill, then say so (exit 0 when a job was killed, 1 when none)."""
        try:
            killed = self.kill_foreground(var, token)
        except Exception:
            killed = 0
        self.send(rid, b"X " + self.dumps(_status(0 if killed else 1)).encode())

    def kill_running(self):
        # type: () -> None
        """The client went away: kill every command still running."""
        with self.running_lock:
            live = list(self.running)
        for rid in live:
            self.kill_tree(None, TAG_VAR, rid.decode())

    def serve(self):
        # type: () -> None
        self.send(b"-", b"READY %d" % os.getpid())
        _thread.start_new_thread(self.follow, ())
        self.done.acquire()


def load_supervisor(arg):
    # type: (str) -> Dict[str, Any]
    """The supervisor's namespace from its source (``arg`` holds a newline), a file path,
    or its code object (compiled by the driver: the local backend's ``bootcode``)."""
    if isinstance(arg, str) and "\n" not in arg:
        with open(arg) as fh:
            arg = fh.read()
    sup = {"__name__": "patchgym_supervisor"}  # type: Dict[str, Any]
    exec(arg if not isinstance(arg, str) else compile(arg, "patchgym_supervisor", "exec"), sup)
    return sup


def main():
    # type: () -> None
    Server(load_supervisor(sys.argv[1]), sys.stdin.buffer, sys.stdout.buffer).serve()


if __name__ == "__main__":
    main()
