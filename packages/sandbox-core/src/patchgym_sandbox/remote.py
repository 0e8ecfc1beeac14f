"""Client side of the in-sandbox supervisor, shared by every remote backend.

A remote backend uploads :func:`supervisor_source` once per sandbox (to
:data:`SUPERVISOR_PATH`), runs :func:`remote_argv` through its native exec call, and feeds
whatever bytes come back into a :class:`FrameDecoder`. The deadline, the idle timeout, the
tree kill and the output cap all happen inside the sandbox; the client only decodes.
"""

from __future__ import annotations

import base64
import json
from importlib import resources

from patchgym_sandbox.errors import InfraError
from patchgym_sandbox.output import OutputCapture, decode
from patchgym_sandbox.result import ExecResult
from patchgym_sandbox.sandbox import ExecRequest

SUPERVISOR_PATH = "/tmp/.patchgym-supervisor.py"
SERVER_READY = b"- READY "
"""The exec server's first line (``- READY <pid>``), see :mod:`patchgym_sandbox.serve`."""


def supervisor_source() -> bytes:
    """The supervisor script (stdlib only, Python 3.6+) to place inside the sandbox."""
    return resources.files("patchgym_sandbox").joinpath("supervisor.py").read_bytes()


def server_source() -> bytes:
    """The in-sandbox exec server (:mod:`patchgym_sandbox.serve`; stdlib only, Python 3.6+)."""
    return resources.files("patchgym_sandbox").joinpath("serve.py").read_bytes()


def server_request(rid: str, req: ExecRequest) -> bytes:
    """One request line for the exec server."""
    return f"{rid} R {encode_request(req)}\n".encode()


def server_kill(var: str, token: str) -> bytes:
    """A line asking the exec server to kill every process carrying ``var=token``."""
    return f"k K {var} {token}\n".encode()


def server_kill_foreground(rid: str, var: str, token: str) -> bytes:
    """A line asking the exec server to kill the foreground job of the interactive shell
    carrying ``var=token`` (see ``supervisor.kill_foreground``); it answers ``rid`` with a
    status once done."""
    return f"{rid} F {var} {token}\n".encode()


KILL_FOREGROUND_SNIPPET = (
    "import sys\nns = {'__name__': 'patchgym_supervisor'}\nsrc = sys.argv[1]\n"
    "exec(src if '\\n' in src else open(src).read(), ns)\n"
    "ns['kill_foreground'](sys.argv[2], sys.argv[3])\n"
)
"""``python3 -I -S -c <this> <supervisor source or path> <var> <token>``: the foreground
kill as a one-shot command, where no exec server runs."""


def kill_foreground_argv(python: str, supervisor: str, var: str, token: str) -> list[str]:
    """argv for :data:`KILL_FOREGROUND_SNIPPET` (``supervisor``: its source or its path)."""
    return [python, "-I", "-S", "-c", KILL_FOREGROUND_SNIPPET, supervisor, var, token]


def request_payload(req: ExecRequest) -> dict[str, object]:
    """The JSON-able request the supervisor (or an in-sandbox exec server) understands."""
    return {
        "cmd": req.cmd,
        "cwd": req.cwd,
        "env": dict(req.env),
        "timeout": req.timeout,
        "idle_timeout": req.idle_timeout,
        "cap": req.max_output_bytes,
        "stdin": base64.b64encode(req.stdin).decode() if req.stdin is not None else None,
    }


def encode_request(req: ExecRequest) -> str:
    return base64.b64encode(json.dumps(request_payload(req)).encode()).decode()


def remote_argv(
    req: ExecRequest, *, python: str = "python3", script: str = SUPERVISOR_PATH
) -> list[str]:
    """argv that runs ``req`` under the supervisor (``-I -S``: no site, no user paths, fast)."""
    return [python, "-I", "-S", script, encode_request(req)]


class FrameDecoder:
    """Turns the supervisor's line records into an :class:`ExecResult`."""

    def __init__(self, max_output_bytes: int) -> None:
        self._capture = OutputCapture(max_output_bytes)
        self._pending = b""
        self._status: dict[str, object] | None = None
        self._garbage: list[bytes] = []

    def feed(self, data: bytes) -> None:
        self._pending += data
        *lines, self._pending = self._pending.split(b"\n")
        for line in lines:
            self._line(line)

    def _line(self, line: bytes) -> None:
        kind, _, rest = line.partition(b" ")
        if kind in (b"1", b"2"):
            self._capture.feed(int(kind), base64.b64decode(rest))
        elif kind == b"D":
            total, out, err = (int(x) for x in rest.split())
            self._capture.combined.dropped += total
            self._capture.stdout.dropped += out
            self._capture.stderr.dropped += err
        elif kind == b"X":
            self._status = json.loads(rest)
        elif line.strip():
            self._garbage.append(line)

    @property
    def finished(self) -> bool:
        return self._status is not None

    def diagnostic(self) -> str:
        """What came back that was not a frame (an interpreter error, usually)."""
        return decode(b"\n".join([*self._garbage, self._pending]))[-2000:]

    def runner_killed(self) -> ExecResult:
        """The result of a command whose in-sandbox exec server died while the sandbox lives.

        Only something inside the sandbox can kill the server there (``kill -9 $PPID``), so
        this is the command's outcome, not an infra failure: exit 137 plus a note on stderr.
        """
        self._pending = b""
        self._capture.feed(
            2, b"\npatchgym: the command killed the sandbox's exec server (its parent); it ended\n"
        )
        status = {"exit_code": 137, "timed_out": False, "idle_timed_out": False, "duration_s": 0.0}
        return self._capture.result(status)

    def result(self) -> ExecResult:
        if self._pending:
            self._line(self._pending)
            self._pending = b""
        if self._status is None:
            raise InfraError(
                "the in-sandbox supervisor ended without a status; is python3 in the image? "
                f"output: {self.diagnostic()!r}"
            )
        return self._capture.result(self._status)
