"""Output capture capped at the source: head and tail kept, the middle counted."""

from __future__ import annotations

from collections.abc import Mapping

from patchgym_sandbox.result import ExecResult

DEFAULT_MAX_OUTPUT_BYTES = 1 << 20  # 1 MiB per stream


class CappedBuffer:
    """Keeps the first and last ``limit // 2`` bytes of a stream and counts the rest."""

    __slots__ = ("_head", "_limit", "_tail", "dropped", "total")

    def __init__(self, limit: int) -> None:
        self._limit = max(0, limit)
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0
        self.dropped = 0

    def write(self, data: bytes) -> None:
        self.total += len(data)
        head_room = (self._limit - self._limit // 2) - len(self._head)
        if head_room > 0:
            self._head += data[:head_room]
            data = data[head_room:]
        if not data:
            return
        self._tail += data
        excess = len(self._tail) - self._limit // 2
        if excess > 0:
            del self._tail[:excess]
            self.dropped += excess

    def getvalue(self) -> bytes:
        if not self.dropped:
            return bytes(self._head + self._tail)
        marker = f"\n[... {self.dropped} bytes dropped ...]\n".encode()
        return bytes(self._head) + marker + bytes(self._tail)

    def text(self) -> str:
        return decode(self.getvalue())


def decode(data: bytes) -> str:
    """UTF-8 with replacement: never raises on arbitrary bytes."""
    return data.decode("utf-8", errors="replace")


class OutputCapture:
    """Separate stdout/stderr buffers plus one interleaved in arrival order."""

    __slots__ = ("combined", "stderr", "stdout")

    def __init__(self, limit: int = DEFAULT_MAX_OUTPUT_BYTES) -> None:
        self.stdout = CappedBuffer(limit)
        self.stderr = CappedBuffer(limit)
        self.combined = CappedBuffer(limit)

    def feed(self, stream: int, data: bytes) -> None:
        """``stream`` is 1 for stdout and 2 for stderr."""
        (self.stdout if stream == 1 else self.stderr).write(data)
        self.combined.write(data)

    @property
    def bytes_dropped(self) -> int:
        return self.combined.dropped

    @property
    def truncated(self) -> bool:
        return bool(self.combined.dropped or self.stdout.dropped or self.stderr.dropped)

    def result(self, status: Mapping[str, object]) -> ExecResult:
        """Combine the captured streams with a supervisor status mapping."""
        return ExecResult(
            exit_code=int(status["exit_code"]),  # type: ignore[call-overload]  # status is parsed JSON: values are object
            stdout=self.stdout.text(),
            stderr=self.stderr.text(),
            output=self.combined.text(),
            timed_out=bool(status["timed_out"]),
            idle_timed_out=bool(status["idle_timed_out"]),
            truncated=self.truncated,
            bytes_dropped=self.bytes_dropped,
            duration_s=float(status["duration_s"]),  # type: ignore[arg-type]  # status is parsed JSON: values are object
            unkilled=_count(status.get("unkilled")),
        )


def _count(value: object) -> int:
    """A status count as sent (a positive int), else 0: the status line crosses the
    sandbox boundary, and a malformed extra field must not fail the exec."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
