"""Commands run under the sandbox-core supervisor through ``docker exec``.

The supervisor source travels in the exec's argv (``python3 -I -S -c <source> <request>``)
instead of being uploaded once: nothing the agent does to ``/tmp`` can break later
commands, a read-only root filesystem works, and start-up saves one archive call.
Requests too large for one argv (a command or stdin over ~96 KiB) are spilled to a file.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import replace
from functools import cache
from typing import TYPE_CHECKING, Protocol

from patchgym_docker.hijack import Hijacked
from patchgym_sandbox.remote import FrameDecoder, encode_request, supervisor_source
from patchgym_sandbox.sandbox import ExecRequest

if TYPE_CHECKING:
    from docker import APIClient

EXEC_ID_VAR = "PATCHGYM_EXEC_ID"
"""Carried by every process of one exec, so a cancelled exec can be killed from outside."""
MAX_INLINE_REQUEST = 96 * 1024
"""Linux limits one argv string to 128 KiB; larger requests go through a spill file."""
SPILL_DIR = "/tmp"

KILL_SNIPPET = (
    "import sys\nns = {'__name__': 'patchgym_supervisor'}\nexec(sys.argv[1], ns)\n"
    "ns['kill_tree'](None, sys.argv[2], sys.argv[3])\n"
)


@cache
def source() -> str:
    """The core supervisor's source, passed in argv."""
    return supervisor_source().decode()


def supervisor_argv(python: str, req: ExecRequest) -> list[str]:
    return [python, "-I", "-S", "-c", source(), encode_request(req)]


def kill_argv(python: str, var: str, token: str) -> list[str]:
    """argv that SIGKILLs every process in the container whose environment has ``var=token``."""
    return [python, "-I", "-S", "-c", KILL_SNIPPET, source(), var, token]


def tag(req: ExecRequest) -> tuple[ExecRequest, str]:
    """The request with a fresh exec token in its environment, and that token."""
    token = uuid.uuid4().hex
    return replace(req, env={**req.env, EXEC_ID_VAR: token}), token


def spill(
    req: ExecRequest, *, argv_only: bool = False
) -> tuple[ExecRequest, dict[str, tuple[bytes, int]]]:
    """Move the command (and stdin) of an oversized request into files under ``/tmp``.

    Returns the rewritten request and the files to upload (name -> (data, mode)). bash
    reads a sourced file whole before running it, so the script deletes itself first.
    ``argv_only``: only the command must fit one argv string (the exec server pipes the
    request itself, so only ``bash -c <cmd>`` is limited).
    """
    size = len(req.cmd.encode()) if argv_only else len(encode_request(req))
    if size <= MAX_INLINE_REQUEST:
        return req, {}
    stem = f".patchgym-req-{uuid.uuid4().hex}"
    script = f"{SPILL_DIR}/{stem}.sh"
    files = {f"{stem}.sh": (f"rm -f -- {script}\n{req.cmd}\n".encode(), 0o644)}
    prefix = ""
    if req.stdin is not None:
        data = f"{SPILL_DIR}/{stem}.in"
        files[f"{stem}.in"] = (req.stdin, 0o644)
        prefix = f"exec 0<{data}; rm -f -- {data}; "
    small = replace(req, cmd=f"{prefix}. {script}", stdin=None)
    return small, files


class Stream(Protocol):
    def close(self) -> None: ...


class ExecCall:
    """One in-flight exec stream that another thread may abort (deadline, cancellation)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stream: Stream | None = None
        self.aborted = False

    def attach(self, stream: Stream) -> bool:
        with self._lock:
            if self.aborted:
                stream.close()
                return False
            self._stream = stream
            return True

    def abort(self) -> None:
        with self._lock:
            self.aborted = True
            stream, self._stream = self._stream, None
        if stream is not None:
            try:
                stream.close()
            except Exception:  # already closed by the engine
                pass


def run_stream(
    api: APIClient, exec_id: str, decoder: FrameDecoder, call: ExecCall
) -> Exception | None:
    """Start exec ``exec_id`` and feed its output (both streams' frames, in order) to
    ``decoder`` until EOF or abort; read through :class:`~patchgym_docker.hijack.Hijacked`,
    so output that arrived with the response's headers is not lost.

    A transport error is returned, not raised: the caller decides from
    ``decoder.finished`` and the container's state whether the sandbox was lost.
    """
    stream = Hijacked(api.exec_start(exec_id, socket=True))
    if not call.attach(stream):
        return None
    try:
        for _, data in stream.frames():
            decoder.feed(data)
    except Exception as exc:
        return None if call.aborted else exc
    finally:
        call.abort()
    return None
