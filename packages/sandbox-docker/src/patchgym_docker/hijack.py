"""A hijacked ``docker exec`` stream, read from its first byte.

``exec_start(socket=True)`` (and ``stream=True``, which reads the same socket) hands out
the socket beneath the HTTP response, but ``http.client`` read the response's headers
through a buffer, and that read takes whatever the engine had already sent behind them:
the command's first output, or all of it and the end of the stream when the command was
fast and this process slow to read (a loaded machine). A reader of the socket alone never
sees those bytes: the command looks as if it printed nothing and ended without a status
(docker-py 7.2; with a 0.3 s pause before the headers are read, 20 of 20 ``echo`` outputs
were lost). :class:`Hijacked` serves that buffer first, then the socket.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import Iterator
from typing import Any

HEADER = struct.Struct(">BxxxL")
"""A frame of docker's multiplexed stream (no tty): stream number, payload size."""


def raw_socket(hijacked: Any) -> socket.socket:
    """The OS socket behind what ``exec_start(socket=True)`` returns (SocketIO or socket)."""
    sock = getattr(hijacked, "_sock", hijacked)
    if not isinstance(sock, socket.socket):
        raise TypeError(
            f"unsupported docker exec transport {type(hijacked).__name__}; use a unix or tcp engine"
        )
    return sock


def _readahead(hijacked: Any) -> bytes:
    """The bytes the response's header read left in its buffer (none where docker-py kept
    no response on the socket). Call with the socket non-blocking: with nothing buffered,
    the one read that ``peek`` makes finds what has arrived since, or nothing."""
    response = getattr(hijacked, "_response", None)
    buffered: Any = getattr(getattr(getattr(response, "raw", None), "_fp", None), "fp", None)
    if buffered is None or not hasattr(buffered, "peek"):
        return b""
    try:
        data = buffered.peek()
        return buffered.read(len(data)) if data else b""
    except (BlockingIOError, ValueError):  # nothing arrived; a closed response
        return b""


class Hijacked:
    """A started exec's socket (blocking from now on), the header read's leftovers first."""

    def __init__(self, hijacked: Any) -> None:
        self.handle = hijacked
        self.sock = raw_socket(hijacked)
        self.sock.setblocking(False)  # what is buffered is taken without waiting for more
        try:
            self._pending = bytearray(_readahead(hijacked))
        finally:
            self.sock.settimeout(None)

    def recv(self, n: int) -> bytes:
        """Up to ``n`` bytes, b"" at the end of the stream."""
        if self._pending:
            data = bytes(self._pending[:n])
            del self._pending[:n]
            return data
        return self.sock.recv(n)

    def read_exactly(self, n: int) -> bytes:
        """``n`` bytes; EOFError where the stream ends first."""
        buf = bytearray()
        while len(buf) < n:
            chunk = self.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return bytes(buf)

    def frames(self) -> Iterator[tuple[int, bytes]]:
        """(stream, payload) of each frame of a multiplexed stream, to its end."""
        while True:
            try:
                stream, size = HEADER.unpack(self.read_exactly(HEADER.size))
                data = self.read_exactly(size)
            except EOFError:
                return
            yield stream, data

    def output(self) -> bytes:
        """Both streams' payloads to the end, then the stream closed (a short command's
        whole output)."""
        try:
            return b"".join(data for _, data in self.frames())
        finally:
            self.close()

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        """End the stream for both sides (a reader blocked in ``recv`` wakes up)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.handle.close()
