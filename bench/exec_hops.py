"""Where an isolated exec's time goes, one layer at a time, each cold (not a test).

    uv run python bench/exec_hops.py              # 300 rounds
    uv run python bench/exec_hops.py --n 1000

``bench/sandbox_exec.py`` compares ``exec('true')`` with raw ``subprocess.run`` and the
peers; this bench takes our exec apart. Every contender below runs ``bash -c true`` (the
bash the sandbox's ``PATH`` finds, by its path) with the isolated sandbox's command
environment, each in a process (or sandbox) of its own, one call each per round, so that
every call finds its own server as cold as the other contenders left it, as an agent's
next command finds its sandbox after the model's turn:

1. raw: ``subprocess.run`` from this process (the baseline of ``sandbox_exec.py``);
2. a native server: ~40 lines of C (compiled with ``cc`` into a temporary folder; left out
   where there is no compiler), one line in, ``posix_spawn``, both pipes polled, one line
   out: the least a long-lived server per sandbox can cost;
3. a minimal Python server: the same loop with ``os.posix_spawn``, on the interpreter the
   sandbox's server runs on;
4. a ``supervise()`` server: one thread calling ``supervisor.supervise`` per line (the
   deadline, idle timeout, tree kill and capped output every command gets);
5. ``serve.py``'s ``Server`` on this machine, spoken to in its own protocol (leader/follower
   threads, base64 JSON requests and frames);
6. an isolated sandbox's own server (``nsinit``, PID 1 in bubblewrap), spoken to the same way;
7. ``ServerConnection.run``: the driver's client of that server (another sandbox);
8. ``Sandbox.exec('true')``: the whole call (another sandbox).

Rows 2-6 are driven by one minimal client (an ``add_reader`` callback and a future). Printed:
p50 per contender, its ratio to raw, what it adds to the layer beneath it (3 over 2, ..., 8
over 7), and the calling
thread's CPU per call (``time.thread_time``: the driver's share; the servers' own CPU is not
in it). Timing decides nothing: ratios in one run, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table
from sandbox_exec import command_env, environ, pct, resolved_bash

import patchgym_sandbox
from patchgym_sandbox import Sandbox, SandboxSpec, create_backend
from patchgym_sandbox.local import serverpython
from patchgym_sandbox.remote import encode_request
from patchgym_sandbox.sandbox import ExecRequest

console = Console(width=120)
OVER = {"3": "2", "4": "3", "5": "4", "6": "5", "7": "6", "8": "7"}
"""Row -> the row it adds one layer to (the native server and raw stand alone)."""
SRC = Path(patchgym_sandbox.__file__).parent
NATIVE_C = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
extern char **environ;
int main(int argc, char **argv) {
  static char line[65536], buf[65536];
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\n")] = 0;
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) return 1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    char *args[] = {"bash", "-c", line, NULL};
    pid_t pid;
    int bad = posix_spawn(&pid, argv[1], &fa, NULL, args, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]); close(err[1]);
    struct pollfd p[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    for (int open = 2; open && !bad;) {
      poll(p, 2, -1);
      for (int i = 0; i < 2; i++)
        if (p[i].fd >= 0 && p[i].revents && read(p[i].fd, buf, sizeof buf) <= 0) {
          close(p[i].fd); p[i].fd = -1; open--;
        }
    }
    int st = 0;
    if (!bad) waitpid(pid, &st, 0);
    printf("X %d\n", bad ? 127 : WEXITSTATUS(st));
    fflush(stdout);
  }
  return 0;
}
"""
REQUESTS_PY = r"""
import os, select, sys
def requests():
    buf = b""
    while True:
        while b"\n" not in buf:
            data = os.read(0, 65536)
            if not data:
                return
            buf += data
        line, _, buf = buf.partition(b"\n")
        yield line.decode()
"""
"""The two Python servers' request loop: one command per line of stdin."""
MINIMAL_PY = (
    REQUESTS_PY
    + r"""
bash = sys.argv[1]
for cmd in requests():
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.posix_spawn(bash, ["bash", "-c", cmd], os.environ,
                         file_actions=[(os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)])
    os.close(out_w)
    os.close(err_w)
    poll, open_ = select.poll(), {out_r, err_r}
    for fd in open_:
        poll.register(fd, select.POLLIN)
    while open_:
        for fd, _ in poll.poll():
            if not os.read(fd, 65536):
                poll.unregister(fd)
                open_.discard(fd)
                os.close(fd)
    os.waitpid(pid, 0)
    os.write(1, b"X 0\n")
"""
)
SUPERVISE_PY = (
    REQUESTS_PY
    + r"""
sup = {"__name__": "patchgym_supervisor"}
exec(open(sys.argv[1]).read(), sup)
for cmd in requests():
    status = sup["supervise"](cmd, lambda stream, data: None)
    os.write(1, b"X %d\n" % status["exit_code"])
"""
)


class LineServer:
    """A server process (or the pipes of one) answering each request line; the reply ends
    with a line starting with ``done``."""

    def __init__(self, write_fd: int, read_fd: int, done: bytes) -> None:
        self.write_fd, self.read_fd, self.done = write_fd, read_fd, done
        self._buf = bytearray()
        self._fut: asyncio.Future[None] | None = None
        os.set_blocking(read_fd, False)
        asyncio.get_running_loop().add_reader(read_fd, self._readable)

    @classmethod
    def spawn(cls, argv: list[str], done: bytes = b"X ", ready: bool = False) -> LineServer:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        assert proc.stdin is not None and proc.stdout is not None
        if ready:  # serve.py says "- READY <pid>" first
            line = b""
            while not line.endswith(b"\n"):
                line += os.read(proc.stdout.fileno(), 4096)
        server = cls(proc.stdin.fileno(), proc.stdout.fileno(), done)
        server.proc = proc  # type: ignore[attr-defined]  # kept alive with its pipes
        return server

    def _readable(self) -> None:
        try:
            self._buf += os.read(self.read_fd, 65536)
        except BlockingIOError:
            return
        end = self._buf.rfind(b"\n", 0, len(self._buf) - 1) + 1
        if self._buf.endswith(b"\n") and self._buf[end:].startswith(self.done) and self._fut:
            self._buf.clear()
            self._fut.set_result(None)

    async def call(self, line: bytes) -> None:
        self._fut = asyncio.get_running_loop().create_future()
        os.write(self.write_fd, line)
        await self._fut

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.read_fd)
        proc = getattr(self, "proc", None)
        if proc is not None:
            proc.stdin.close()
            proc.wait(10)


def native_server(work: Path, bash: str) -> LineServer | str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return "no C compiler (cc) here"
    (work / "srv.c").write_text(NATIVE_C)
    done = subprocess.run([cc, "-O2", "-o", str(work / "srv"), str(work / "srv.c")],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        return f"cc failed: {done.stderr.strip()[-200:]}"
    return LineServer.spawn([str(work / "srv"), bash])


def true_request(sb: Sandbox, cwd: str | None = None) -> ExecRequest:
    """``exec('true')`` as ``sb`` would send it (in ``cwd`` instead of its workdir)."""
    return ExecRequest(cmd="true", timeout=None, idle_timeout=None, cwd=cwd or sb.workdir,
                       env=dict(sb.spec.env), stdin=None, user=None,
                       max_output_bytes=sb.spec.max_output_bytes)  # fmt: skip


def request_line(rid: bytes, req: ExecRequest) -> bytes:
    return rid + b" R " + encode_request(req).encode() + b"\n"


async def main_async(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="pg-hops-"))
    backend = create_backend({"type": "local", "state_dir": str(work / "state")})
    boxes = [await backend.sandbox(SandboxSpec()).start() for _ in range(3)]
    env = await command_env(boxes[0])
    bash = resolved_bash(env)
    python = serverpython.server_python(sys.executable)
    calls: list[tuple[str, Callable[[], Awaitable[object]] | str]] = []
    servers: list[LineServer] = []
    with environ(env):  # the servers, and what they start, inherit it

        async def raw() -> object:
            return subprocess.run([bash, "-c", "true"], capture_output=True)

        calls.append(("1 raw subprocess.run", raw))
        native = native_server(work, bash)
        if isinstance(native, str):
            calls.append(("2 native server (C)", native))
        else:
            servers.append(native)
            calls.append(("2 native server (C)", lambda: native.call(b"true\n")))
        for name, src, extra in (
            ("3 minimal Python server", MINIMAL_PY, [bash]),
            ("4 supervise() server", SUPERVISE_PY, [str(SRC / "supervisor.py")]),
        ):
            (work / f"{name[0]}.py").write_text(src)
            server = LineServer.spawn([python, "-I", "-S", str(work / f"{name[0]}.py"), *extra])
            servers.append(server)
            calls.append((name, lambda s=server: s.call(b"true\n")))
        host = LineServer.spawn(
            [python, "-I", "-S", str(SRC / "serve.py"), str(SRC / "supervisor.py")],
            done=b"r X ", ready=True,
        )  # fmt: skip
        servers.append(host)
        host_line = request_line(b"r", true_request(boxes[0], cwd="/"))  # not on this machine
        calls.append(("5 serve.py Server (this machine)", lambda: host.call(host_line)))
        conn = boxes[0]._server  # type: ignore[attr-defined]  # the bench speaks to it directly
        conn.detach()
        inside = LineServer(conn.proc.stdin.fileno(), conn._fd, b"q X ")
        servers.append(inside)
        inside_line = request_line(b"q", true_request(boxes[0]))
        calls.append(("6 the sandbox's server (nsinit)", lambda: inside.call(inside_line)))
        req = true_request(boxes[1])
        client = boxes[1]._server  # type: ignore[attr-defined]
        calls.append(("7 ServerConnection.run", lambda: client.run(req)))
        calls.append(("8 Sandbox.exec('true')", lambda: boxes[2].exec("true")))
        wall: dict[str, list[float]] = {n: [] for n, f in calls if not isinstance(f, str)}
        cpu: dict[str, list[float]] = {n: [] for n in wall}
        for i in range(args.n + 20):
            for name, fn in calls:
                if isinstance(fn, str):
                    continue
                c0, t0 = time.thread_time(), time.perf_counter()
                await fn()
                if i >= 20:  # warm-up rounds
                    wall[name].append(time.perf_counter() - t0)
                    cpu[name].append(time.thread_time() - c0)
    for server in servers:
        server.close()
    for sb in boxes:  # box 0's server was spoken to directly: its close kills it all the same
        await sb.close()
    await backend.aclose()
    shutil.rmtree(work, ignore_errors=True)
    print_table(calls, wall, cpu, args.n)


def print_table(
    calls: list[tuple[str, object]],
    wall: dict[str, list[float]],
    cpu: dict[str, list[float]],
    n: int,
) -> None:
    console.print(
        f"{n} rounds, one call of each contender per round, each on its own server; "
        "all run the same bash with the isolated sandbox's command environment"
    )
    t = Table(title="exec('true'), layer by layer, cold")
    for col in ("contender", "p50 ms", "/ raw", "adds ms", "this thread CPU ms"):
        t.add_column(col, justify="left" if col == "contender" else "right")
    raw = pct(wall[calls[0][0]], 0.5)
    mids = {name[0]: pct(wall[name], 0.5) for name in wall}
    for name, fn in calls:
        if isinstance(fn, str):
            t.add_row(name, "-", "-", "-", f"left out: {fn}")
            continue
        mid = mids[name[0]]
        below = OVER.get(name[0])  # the layer this one adds to
        adds = f"{mid - mids[below]:+.3f}" if below in mids else ""
        t.add_row(name, f"{mid:.3f}", f"{mid / raw:.2f}x", adds,
                  f"{sum(cpu[name]) / len(cpu[name]) * 1000:.3f}")  # fmt: skip
    console.print(t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=300, help="rounds (one call of each per round)")
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()
