"""One exec call through the API's websocket: channel frames in, stdin out, the exit status.

Frames are read straight off the websocket (``channel byte + payload``), so stdout and
stderr stay bytes whatever the client's text handling, and everything is read in the
order the kubelet sent it. A stream is owned by one thread at a time.
"""

from __future__ import annotations

import json
import select
import ssl
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.stream import stream as k8s_stream
from websocket import ABNF, WebSocketException

from patchgym_k8s.client import Api

STDIN, STDOUT, STDERR, STATUS, RESIZE = 0, 1, 2, 3, 4
V5_CLOSE = 255
CHUNK = 1 << 20


class StreamOpenError(Exception):
    """The exec websocket could not be opened (the command did not start)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class ExecStatus:
    """The status channel's verdict: ``code`` is None when the process did not report one."""

    code: int | None
    message: str = ""


def parse_status(raw: bytes) -> ExecStatus:
    """Decode the status channel (a metav1.Status): Success, NonZeroExitCode or a failure."""
    try:
        data: dict[str, Any] = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return ExecStatus(None, raw.decode("utf-8", "replace")[:500])
    if data.get("status") == "Success":
        return ExecStatus(0)
    for cause in (data.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            try:
                return ExecStatus(int(cause.get("message")), str(data.get("message", "")))
            except (TypeError, ValueError):
                break
    return ExecStatus(None, str(data.get("message", raw[:500])))


def _handshake_status(exc: ApiException) -> int:
    reason = str(exc.reason or "")
    marker = "Handshake status "
    if marker in reason:
        try:
            return int(reason.split(marker, 1)[1].split()[0])
        except (ValueError, IndexError):
            return 0
    return int(exc.status or 0)


class ExecStream:
    """An open exec websocket. ``recv`` yields ``(channel, bytes)``; ``None`` = closed."""

    def __init__(
        self, api: Api, pod: str, container: str, argv: list[str], *, stdin: bool, tty: bool
    ) -> None:
        try:
            client = k8s_stream(
                api.stream_core().connect_get_namespaced_pod_exec,
                pod,
                api.cfg.namespace,
                container=container,
                command=argv,
                stdin=stdin,
                stdout=True,
                stderr=not tty,
                tty=tty,
                _preload_content=False,
            )
        except ApiException as exc:
            raise StreamOpenError(str(exc.reason or exc)[:1000], _handshake_status(exc)) from exc
        except (OSError, WebSocketException) as exc:
            raise StreamOpenError(str(exc), 0) from exc
        self._client = client
        self.sock = client.sock
        self.v5 = getattr(client, "subprotocol", None) == "v5.channel.k8s.io"
        self.status_raw = b""
        self.closed = False

    def fileno(self) -> int:
        fd: int = self.sock.sock.fileno()
        return fd

    def pending(self) -> bool:
        raw = self.sock.sock
        return isinstance(raw, ssl.SSLSocket) and raw.pending() > 0

    def wait(self, timeout: float | None) -> bool:
        """True when a frame can be read now (or soon), False after ``timeout``."""
        if self.closed or self.pending():
            return True
        try:
            r, _, _ = select.select([self.fileno()], [], [], timeout)
        except (OSError, ValueError):
            return True
        return bool(r)

    def recv(self) -> tuple[int, bytes] | None:
        """Read one frame: ``(channel, payload)`` (payload may be empty), None once closed.

        Reads exactly one websocket frame so a caller that polled first never blocks here
        past that frame. Status-channel payloads are also collected into ``status_raw``.
        """
        if self.closed:
            return None
        try:
            opcode, frame = self.sock.recv_data_frame(True)
        except (WebSocketException, OSError, ValueError):
            self.closed = True
            return None
        if opcode == ABNF.OPCODE_CLOSE:
            self.closed = True
            return None
        if opcode not in (ABNF.OPCODE_BINARY, ABNF.OPCODE_TEXT):
            return (V5_CLOSE, b"")
        data = frame.data if isinstance(frame.data, bytes) else str(frame.data).encode()
        if not data:
            return (V5_CLOSE, b"")
        channel, payload = data[0], data[1:]
        if channel == STATUS:
            self.status_raw += payload
        return channel, payload

    def send(self, channel: int, data: bytes) -> None:
        view = memoryview(data)
        for i in range(0, len(view), CHUNK):
            self.sock.send(bytes([channel]) + bytes(view[i : i + CHUNK]), opcode=ABNF.OPCODE_BINARY)

    def close_stdin(self) -> None:
        """Signal EOF on stdin where the server speaks v5 (on v4 there is no way to)."""
        if self.v5:
            self.sock.send(bytes([V5_CLOSE, STDIN]), opcode=ABNF.OPCODE_BINARY)

    def exit_status(self) -> ExecStatus:
        return (
            parse_status(self.status_raw)
            if self.status_raw
            else ExecStatus(None, "no status from the kubelet")
        )

    def close(self) -> None:
        self.closed = True
        try:
            self._client.close()
        except Exception:
            pass
