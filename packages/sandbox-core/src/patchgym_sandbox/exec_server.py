# ruff: noqa: UP031, UP035
"""In-sandbox exec server: one long-lived process through which every command runs.

Run as ``python3 -I -S -c <this file> <supervisor source> <json config>`` inside the
sandbox; stdlib only, Python 3.6+. The local backend starts it as PID 1 of the sandbox's
own PID namespace (bubblewrap ``--as-pid-1``), which gives three properties at once:
commands cost one fork instead of one sandbox setup; background processes live on between
commands; and nothing inside can kill it (the kernel drops SIGKILL sent to a namespace's
init from inside), while killing it from outside takes the whole namespace down. As PID 1
it reaps orphans. It makes itself non-dumpable, so commands (root, but without
capabilities) cannot open its pipes through ``/proc/1/fd`` to forge replies.

Each request runs ``supervise()`` from the sandbox-core supervisor (deadline, idle timeout,
tree kill, output cap at the source). Wire format, one line each way, ``<rid>`` a
client-chosen token without spaces:
  in:  ``<rid> R <b64 json>``   run a command (``patchgym_sandbox.remote.request_payload``)
       ``<rid> K``              kill what request ``rid`` started
       ``<rid> S <b64 json>``   open a shell on a pty: ``{"argv", "cwd", "env"}``
       ``<rid> W <b64>``        write to the shell's pty
       ``<rid> I``              kill the shell's foreground job
       ``<rid> C``              close the shell
  out: ``<rid> <frame>``        supervisor frames (``1 <b64>``, ``2 <b64>``, ``D ...``, ``X <json>``);
                                a shell sends ``1 <b64>`` and ``E`` at its end
       ``- READY <pid>``        once, at start
When stdin closes (the driver went away) it exits, and with it the namespace.
"""

import base64
import fcntl
import json
import os
import resource
import signal
import subprocess
import sys
import termios
import threading
import time
import types
from typing import Any, Dict, List, Tuple  # noqa: F401 (type comments, Python 3.6)

SUP = {"__name__": "patchgym_supervisor"}  # type: Dict[str, Any]
exec(sys.argv[1], SUP)
CONFIG = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}  # type: Dict[str, Any]
OUT = sys.stdout.buffer
LOCK = threading.Lock()
SPAWN_LOCK = threading.Lock()
OWNED = {}  # type: Dict[int, subprocess.Popen[bytes]]
SHELLS = {}  # type: Dict[bytes, Tuple[subprocess.Popen[bytes], int]]
TAG_VAR = "PATCHGYM_SERVER_REQ"
LIMITS = [(getattr(resource, k), int(v)) for k, v in (CONFIG.get("rlimits") or {}).items()]


def send(rid, line):
    # type: (bytes, bytes) -> None
    with LOCK:
        OUT.write(rid + b" " + line + b"\n")
        OUT.flush()


class OwnedPopen(subprocess.Popen):  # type: ignore[type-arg]
    """A child the reaper must leave to its owner (registered under the spawn lock)."""

    def __init__(self, *args, **kwargs):
        # type: (Any, Any) -> None
        with SPAWN_LOCK:
            super().__init__(*args, **kwargs)
            OWNED[self.pid] = self


_shim = types.ModuleType("subprocess")
_shim.__dict__.update(subprocess.__dict__)
_shim.Popen = OwnedPopen  # type: ignore[attr-defined]
SUP["subprocess"] = _shim


def reap_orphans():
    # type: () -> None
    """PID 1's duty: wait for zombies nobody else will, never for a supervised child."""
    me = str(os.getpid())
    while True:
        time.sleep(0.2)
        with SPAWN_LOCK:
            for pid, p in list(OWNED.items()):
                if p.returncode is not None:
                    del OWNED[pid]
            for name in os.listdir("/proc"):
                if not name.isdigit() or int(name) in OWNED:
                    continue
                try:
                    with open("/proc/%s/stat" % name) as fh:
                        fields = fh.read().rsplit(")", 1)[1].split()
                except (OSError, IndexError):
                    continue
                if fields[0] == "Z" and fields[1] == me:
                    try:
                        os.waitpid(int(name), os.WNOHANG)
                    except OSError:
                        pass


def apply_limits():
    # type: () -> None
    for which, value in LIMITS:
        resource.setrlimit(which, (value, value))


class Capper:
    """The output cap at the source: the first ``cap`` bytes go out at once, the last
    ``cap // 2`` are held back and sent at the end, the middle is counted."""

    def __init__(self, rid, cap):
        # type: (bytes, int) -> None
        self.rid = rid
        self.cap = cap
        self.sent = 0
        self.tail = []  # type: List[Tuple[int, bytes]]
        self.tail_bytes = 0
        self.dropped = [0, 0, 0]  # type: List[int]

    def emit(self, stream, data):
        # type: (int, bytes) -> None
        send(self.rid, b"%d %s" % (stream, base64.b64encode(data)))

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
            send(self.rid, b"D %d %d %d" % (d[0], d[1], d[2]))
        for s, data in self.tail:
            self.emit(s, data)


def run(rid, payload):
    # type: (bytes, bytes) -> None
    capper = Capper(rid, 1 << 20)
    try:
        args = json.loads(base64.b64decode(payload).decode())
        capper.cap = int(args.get("cap", 1 << 20))
        stdin = base64.b64decode(args["stdin"]) if args.get("stdin") is not None else None
        env = dict(os.environ)
        env.update(args.get("env") or {})
        env[TAG_VAR] = rid.decode()
        status = SUP["supervise"](
            args["cmd"],
            capper.on_chunk,
            cwd=args.get("cwd"),
            env=env,
            timeout=args.get("timeout"),
            idle_timeout=args.get("idle_timeout"),
            stdin=stdin,
            preexec_fn=apply_limits if LIMITS else None,
        )
    except OSError as exc:  # e.g. the cwd does not exist
        capper.emit(2, ("patchgym: cannot run command: %s\n" % exc).encode())
        status = {"exit_code": 127, "timed_out": False, "idle_timed_out": False, "duration_s": 0.0}
    except Exception as exc:  # never leave the client waiting without a status
        capper.emit(2, ("patchgym: exec server error: %r\n" % (exc,)).encode())
        status = {"exit_code": 126, "timed_out": False, "idle_timed_out": False, "duration_s": 0.0}
    capper.finish()
    send(rid, b"X " + json.dumps(status).encode())


def _take_tty():
    # type: () -> None
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    apply_limits()


def open_shell(rid, payload):
    # type: (bytes, bytes) -> None
    """Spawn the shell here (so writes that follow find it), relay its pty in a thread."""
    args = json.loads(base64.b64decode(payload).decode())
    master, slave = os.openpty()
    try:
        proc = OwnedPopen(
            args["argv"],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=args.get("cwd"),
            env=args.get("env"),
            start_new_session=True,
            preexec_fn=_take_tty,
        )
    except OSError as exc:
        os.close(master)
        send(rid, b"1 " + base64.b64encode(("patchgym: cannot open shell: %s\n" % exc).encode()))
        send(rid, b"E")
        return
    finally:
        os.close(slave)
    SHELLS[rid] = (proc, master)
    threading.Thread(target=relay, args=(rid, master), daemon=True).start()


def relay(rid, master):
    # type: (bytes, int) -> None
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            data = b""
        if not data:
            break
        send(rid, b"1 " + base64.b64encode(data))
    send(rid, b"E")


def shell_op(rid, op, arg):
    # type: (bytes, bytes, bytes) -> None
    entry = SHELLS.get(rid)
    if entry is None:
        return
    proc, master = entry
    try:
        if op == b"W":
            data = base64.b64decode(arg)
            while data:
                data = data[os.write(master, data) :]
        elif op == b"I":
            pgid = os.tcgetpgrp(master)
            if pgid > 0 and pgid != proc.pid:
                os.killpg(pgid, signal.SIGKILL)
        elif op == b"C":
            SHELLS.pop(rid, None)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            os.close(master)
            proc.wait()
    except OSError:
        pass


def main():
    # type: () -> None
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
    except Exception:
        pass
    if os.getpid() == 1:
        threading.Thread(target=reap_orphans, daemon=True).start()
    send(b"-", b"READY %d" % os.getpid())
    for raw in sys.stdin.buffer:
        rid, _, rest = raw.rstrip(b"\n").partition(b" ")
        op, _, arg = rest.partition(b" ")
        if op == b"R":
            threading.Thread(target=run, args=(rid, arg), daemon=True).start()
        elif op == b"K":
            threading.Thread(target=SUP["kill_tree"], args=(None, TAG_VAR, rid.decode())).start()
        elif op == b"S":
            open_shell(rid, arg)
        elif op in (b"W", b"I", b"C"):
            shell_op(rid, op, arg)


main()
