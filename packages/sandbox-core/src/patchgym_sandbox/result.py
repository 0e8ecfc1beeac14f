"""The outcome of one command: never an exception for a non-zero exit or a timeout."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

TIMEOUT_EXIT_CODE = 124
"""Exit code reported when the deadline or the idle timeout killed the command (as GNU ``timeout``)."""


class ExecResult(BaseModel):
    """What a command did.

    ``output`` is stdout and stderr interleaved in arrival order (chunk granularity);
    ``stdout`` / ``stderr`` are the separate streams. All three are capped at the
    source, keeping head and tail; ``bytes_dropped`` counts what was cut from the
    combined stream. Bytes that are not UTF-8 are decoded with replacement.
    """

    model_config = ConfigDict(frozen=True)

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    output: str = ""
    timed_out: bool = False
    idle_timed_out: bool = False
    truncated: bool = False
    bytes_dropped: int = 0
    duration_s: float = 0.0
    unkilled: int = 0
    """Processes of the command still alive ``KILL_WAIT_S`` after the SIGKILL that ended
    it (stuck in uninterruptible sleep: a hung filesystem, a frozen cgroup): they may hold
    the sandbox's files or memory until the kernel lets them die; 0 when all died."""

    @property
    def ok(self) -> bool:
        """True when the command exited 0 and was not killed."""
        return self.exit_code == 0 and not (self.timed_out or self.idle_timed_out)

    def check(self) -> ExecResult:
        """Return self, or raise :class:`CommandFailed` when the command did not succeed."""
        if not self.ok:
            raise CommandFailed(self)
        return self


class CommandFailed(Exception):
    """Raised only by :meth:`ExecResult.check`, for scripts that want exceptions."""

    def __init__(self, result: ExecResult) -> None:
        tail = result.output[-2000:]
        why = (
            "timed out"
            if result.timed_out
            else ("idle timeout" if result.idle_timed_out else f"exit code {result.exit_code}")
        )
        super().__init__(f"command failed ({why}); output tail:\n{tail}")
        self.result = result
