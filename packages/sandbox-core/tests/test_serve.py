"""The in-sandbox exec server loop (``patchgym_sandbox.serve``), run as the sandboxes run it.

It is a subprocess fed request lines on stdin, under the test's interpreter and, where
pyenv has one, under Python 3.6 (the oldest interpreter an image may ship).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchgym_sandbox.remote import (
    SERVER_READY,
    FrameDecoder,
    server_kill,
    server_kill_foreground,
    server_request,
    server_source,
    supervisor_source,
)
from patchgym_sandbox.sandbox import ExecRequest
from patchgym_sandbox.testing.waits import eventually_sync

PY36 = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions/3.6.15/bin/python3.6"
INTERPRETERS = [
    pytest.param(sys.executable, id="current"),
    pytest.param(
        str(PY36),
        id="py3.6",
        marks=pytest.mark.skipif(not PY36.exists(), reason=f"no Python 3.6 at {PY36}"),
    ),
]


def request(cmd: str, **kw: object) -> ExecRequest:
    fields: dict[str, object] = {
        "cmd": cmd,
        "timeout": 30.0,
        "idle_timeout": None,
        "cwd": "/",
        "env": {},
        "stdin": None,
        "user": None,
        "max_output_bytes": 1 << 20,
    }
    fields.update(kw)
    return ExecRequest(**fields)  # type: ignore[arg-type]


def start(python: str, tmp_path: Path) -> subprocess.Popen[bytes]:
    """The server as ``python -I -S serve.py <supervisor path>``, after its READY line."""
    (tmp_path / "serve.py").write_bytes(server_source())
    (tmp_path / "sup.py").write_bytes(supervisor_source())
    proc = subprocess.Popen(
        [python, "-I", "-S", str(tmp_path / "serve.py"), str(tmp_path / "sup.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    assert proc.stdout.readline().startswith(SERVER_READY)
    return proc


def running(marker: str) -> bool:
    return subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0


def send(proc: subprocess.Popen[bytes], *lines: bytes) -> None:
    assert proc.stdin is not None
    proc.stdin.write(b"".join(lines))
    proc.stdin.flush()


def collect(proc: subprocess.Popen[bytes], rids: set[bytes]) -> dict[bytes, FrameDecoder]:
    """Read tagged frames until every request in ``rids`` has its exit status."""
    assert proc.stdout is not None
    decoders = {rid: FrameDecoder(1 << 20) for rid in rids}
    while not all(d.finished for d in decoders.values()):
        line = proc.stdout.readline()
        assert line, "the server exited early"
        rid, _, frame = line.partition(b" ")
        decoders[rid].feed(frame)
    return decoders


@pytest.mark.parametrize("python", INTERPRETERS)
def test_concurrent_requests_capped_at_the_source(python: str, tmp_path: Path) -> None:
    lines = [
        server_request("a", request("echo out; echo err >&2; exit 3")),
        server_request(
            "b", request("head -c 100000 /dev/zero | tr '\\0' x", max_output_bytes=4096)
        ),
        server_request("c", request("cat", stdin=b"from stdin")),
        server_request("d", request("sleep 5", timeout=0.5)),
        server_request("e", request("true", cwd="/nonexistent-dir")),
    ]
    proc = start(python, tmp_path)
    send(proc, *lines, b"garbage line\n")
    dec = collect(proc, {b"a", b"b", b"c", b"d", b"e"})
    send(proc)
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=20) == 0
    a = dec[b"a"].result()
    assert (a.exit_code, a.stdout, a.stderr) == (3, "out\n", "err\n")
    b = dec[b"b"].result()
    assert b.truncated and b.bytes_dropped == 100000 - 4096 - 2048
    assert b.stdout.count("x") == 4096 + 2048  # head + tail around the dropped marker
    assert dec[b"c"].result().stdout == "from stdin"
    assert dec[b"d"].result().timed_out
    assert dec[b"e"].result().exit_code == 127


def test_kill_line_and_eof_kill_running_commands(tmp_path: Path) -> None:
    marker = f"pg-serve-{os.getpid()}"
    lines = [
        server_request("a", request(f"exec -a {marker} sleep 30", env={"TOK": marker})),
        server_kill("TOK", marker),
    ]
    proc = start(sys.executable, tmp_path)
    send(proc, lines[0])
    assert eventually_sync(lambda: running(marker)), "the command never started"
    send(proc, lines[1])
    assert (
        collect(proc, {b"a"})[b"a"].result().exit_code == 137
    )  # SIGKILLed by the K line, well before 30 s
    # a second command still running when stdin closes dies with the server
    send(proc, server_request("b", request(f"exec -a {marker}-eof sleep 30")))
    assert eventually_sync(lambda: running(f"{marker}-eof")), "the command never started"
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=20)
    left = subprocess.run(["pgrep", "-f", f"{marker}-eof"], capture_output=True)
    assert left.returncode == 1, left.stdout


@pytest.mark.parametrize("python", INTERPRETERS)
async def test_foreground_kill_line_ends_a_job_ignoring_int_and_quit(
    python: str, tmp_path: Path
) -> None:
    """``F <var> <token>``: the server kills the foreground job of the interactive shell
    carrying the token, never the shell (the remote backends' ``kill_foreground``)."""
    from patchgym_sandbox.local.shell import PtyChannel
    from patchgym_sandbox.session import ShellSession

    token = f"pg-fg-{os.getpid()}-{python[-3:]}"
    proc = start(python, tmp_path)

    class ViaServer(PtyChannel):
        async def kill_foreground(self) -> None:
            send(proc, server_kill_foreground("f1", "PG_TEST_SHELL", token))
            assert collect(proc, {b"f1"})[b"f1"].result().exit_code == 0  # one job killed

    async def opener() -> PtyChannel:
        env = {**os.environ, "PG_TEST_SHELL": token}
        chan = await ViaServer.spawn(str(tmp_path), env)
        return chan

    try:
        async with ShellSession(opener) as sh:
            r = await sh.run("trap '' INT QUIT; cat", timeout=1)
            assert r.timed_out and r.exit_code == 137, r
            assert (await sh.run("echo alive")).output.strip() == "alive"
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=20)


@pytest.mark.parametrize("python", INTERPRETERS)
def test_turn_to_read_passes_on_when_a_spawn_fails(python: str, tmp_path: Path) -> None:
    """A request whose command cannot start still hands the reading on: the ones after it,
    sent one at a time, are read and answered (a leaked turn would hang the server); so
    does a line the server cannot handle (not UTF-8 where it must be)."""
    proc = start(python, tmp_path)
    send(proc, b"k K \xff \xfe\n")
    for i in range(3):
        send(proc, server_request(f"bad{i}", request("true", cwd="/nonexistent-dir")))
        assert collect(proc, {f"bad{i}".encode()})[f"bad{i}".encode()].result().exit_code == 127
        send(proc, server_request(f"ok{i}", request(f"echo {i}")))
        assert collect(proc, {f"ok{i}".encode()})[f"ok{i}".encode()].result().stdout == f"{i}\n"
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=20) == 0
