"""A persistent interactive shell over any backend's pty channel.

Backends only provide a :class:`ShellChannel` (bytes in, bytes out, over a pty running
``bash -i``). This module owns the protocol: echo off, empty prompts, and per command a
brace group followed on the same line by a nonce marker carrying ``$?`` — bash parses the
whole line before running it, so the marker can never be swallowed by a command that
reads stdin. A timeout interrupts the foreground job (Ctrl-C, then the backend kills its
process group) and the session survives, even when the job ignores INT and QUIT. Interactive programs (``python -m pdb``) are driven with
:meth:`ShellSession.send` and :meth:`ShellSession.expect`.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Self

from pydantic import BaseModel

from patchgym_sandbox.errors import SessionError
from patchgym_sandbox.output import decode
from patchgym_sandbox.sessionbuf import SessionBuffer

SHELL_ARGV = ("bash", "--noprofile", "--norc", "--noediting", "-i")
SHELL_ENV = {"PS1": "", "PS2": "", "PROMPT_COMMAND": "", "TERM": "dumb", "HISTFILE": "/dev/null"}


MAX_QUEUED_BYTES = 1 << 20
"""Output a channel holds while no one reads; past it what came after the oldest unread
chunk is dropped and counted (the oldest and the newest stay, as a session's head and tail)."""


class ShellChannel(ABC):
    """A byte pipe to ``bash -i`` on a pty. Reads come from an internal, bounded queue."""

    max_queued_bytes = MAX_QUEUED_BYTES

    def __init__(self) -> None:
        self._chunks: deque[bytes] = deque()
        self._queued = 0
        self._dropped = 0
        self._eof = False
        self._ready = asyncio.Event()

    def feed(self, data: bytes) -> None:
        """Called by the backend's reader with output; ``b""`` signals end of stream."""
        if not data:
            self._eof = True
        else:
            self._chunks.append(data)
            self._queued += len(data)
            # the oldest unread chunk (the head of a flood) and the newest stay: the chunks
            # after the oldest go, so a reader slower than the output still sees how it began
            while self._queued > self.max_queued_bytes and len(self._chunks) > 2:
                old = self._chunks[1]
                del self._chunks[1]
                self._queued -= len(old)
                self._dropped += len(old)
        self._ready.set()

    def feed_threadsafe(self, loop: asyncio.AbstractEventLoop, data: bytes) -> None:
        loop.call_soon_threadsafe(self.feed, data)

    async def read(self) -> bytes:
        """The next chunk (followed by a note if the output after it was dropped); ``b""``
        at end of stream."""
        while not self._chunks:
            if self._eof:
                return b""
            self._ready.clear()
            await self._ready.wait()
        chunk = self._chunks.popleft()
        self._queued -= len(chunk)
        if self._dropped:
            note = f"\n[... {self._dropped} bytes of output dropped ...]\n".encode()
            chunk, self._dropped = chunk + note, 0
        return chunk

    @abstractmethod
    async def write(self, data: bytes) -> None: ...

    async def interrupt(self) -> None:
        """Ctrl-C through the terminal: SIGINT to the foreground job only."""
        await self.write(b"\x03")

    async def kill_foreground(self) -> None:
        """Kill the foreground job even if it ignores INT and QUIT.

        Every bundled backend kills the terminal's foreground process group (SIGKILL)
        through its in-sandbox server; this default, for channels that cannot, is only
        Ctrl-\\ (SIGQUIT) through the terminal.
        """
        await self.write(b"\x1c")

    @abstractmethod
    async def close(self) -> None: ...


class SessionResult(BaseModel):
    output: str
    exit_code: int | None = None
    timed_out: bool = False


class ShellSession:
    """State (cwd, variables, a running debugger) survives between commands."""

    def __init__(self, opener: Callable[[], Awaitable[ShellChannel]]) -> None:
        self._opener = opener
        self._chan: ShellChannel | None = None
        self._buf = SessionBuffer()
        self._eof = False
        self._lock = asyncio.Lock()

    async def start(self) -> Self:
        if self._chan is None:
            self._chan = await self._opener()
            await self._chan.write(
                b"stty -echo -onlcr 2>/dev/null; bind 'set enable-bracketed-paste off' 2>/dev/null\n"
            )
            res = await self.run("true", timeout=30)
            if res.timed_out:
                raise SessionError("the shell did not answer within 30 s of starting")
        return self

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        chan, self._chan = self._chan, None
        if chan is not None:
            await chan.close()

    def _channel(self) -> ShellChannel:
        if self._chan is None:
            raise SessionError("session is not started (use `async with sandbox.session()`)")
        return self._chan

    async def send(self, text: str) -> None:
        """Write raw input (include the newline) to whatever is in the foreground."""
        await self._channel().write(text.encode())

    async def interrupt(self) -> None:
        await self._channel().interrupt()

    async def _fill(
        self, deadline: float, pattern: re.Pattern[str] | None = None
    ) -> re.Match[str] | bool:
        """Read one chunk into the buffer, searching it (and the overlap) for ``pattern``.

        The match, or True for a chunk without one; False on deadline. Raises on end of stream.
        """
        if self._eof:
            raise SessionError("the shell session ended (did a command run `exit`?)")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        try:
            chunk = await asyncio.wait_for(self._channel().read(), remaining)
        except TimeoutError:
            return False
        if not chunk:
            self._eof = True
            raise SessionError("the shell session ended (did a command run `exit`?)")
        m = self._buf.feed(decode(chunk).replace("\r\n", "\n"), pattern)
        return m if m is not None else True

    async def _wait_for(
        self, pattern: re.Pattern[str], timeout: float | None
    ) -> re.Match[str] | None:
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        m = self._buf.search(pattern)  # what an earlier read left over, searched once
        while m is None:
            got = await self._fill(deadline, pattern)
            if got is False:
                return None
            m = got if isinstance(got, re.Match) else None
        return m

    async def expect(
        self, pattern: str | re.Pattern[str], timeout: float | None = 30
    ) -> SessionResult:
        """Read until ``pattern`` (a regex) appears; returns the text up to and including it."""
        pat = re.compile(pattern) if isinstance(pattern, str) else pattern
        async with self._lock:
            m = await self._wait_for(pat, timeout)
            if m is None:
                return SessionResult(output=self._buf.take_all(), timed_out=True)
            return SessionResult(output=self._buf.take(m.end()))

    async def run(self, cmd: str, timeout: float | None = 60) -> SessionResult:
        """Run a shell command in the session and return its output and exit status.

        On timeout the foreground job is interrupted (Ctrl-C, then
        :meth:`ShellChannel.kill_foreground`) and the result says ``timed_out``; the
        session itself stays usable.
        """
        nonce = uuid.uuid4().hex[:12]
        line = f"{{ {cmd}\n}}; {_marker_cmd(nonce)}\n"
        async with self._lock:
            chan = self._channel()
            await chan.write(line.encode())
            m = await self._wait_for(_marker(nonce), timeout)
            if m is not None:
                out = self._buf.take(m.start(), skip=m.end() - m.start())
                return SessionResult(output=_ANY_MARKER.sub("", out), exit_code=int(m.group(1)))
            assert timeout is not None
            # Ctrl-C first, with a grace in proportion to the step; then the foreground job
            # is killed (it may ignore INT and QUIT) and the shell gets a generous deadline.
            for escalate, grace in (
                (chan.interrupt, interrupt_grace_s(timeout)),
                (chan.kill_foreground, kill_answer_s(timeout)),
            ):
                await escalate()
                m = await self._await_shell(chan, time.monotonic() + grace)
                if m is not None:
                    out = self._buf.take(m.start(), skip=m.end() - m.start())
                    first = _marker(nonce).search(out)
                    code = int(first.group(1)) if first else int(m.group(2))
                    return SessionResult(
                        output=_ANY_MARKER.sub("", out), exit_code=code, timed_out=True
                    )
            raise SessionError(f"command {cmd!r} could not be interrupted; the session is unusable")

    async def _await_shell(self, chan: ShellChannel, deadline: float) -> re.Match[str] | None:
        """Wait until the shell answers a probe, or ``deadline``; None if it never did.

        An interactive bash drops the rest of the line when Ctrl-C kills the job, the
        terminal may flush input typed meanwhile, and a job still alive reads what is typed:
        so a fresh probe is typed now and then (at growing intervals) and the first answer
        to any of them ends the wait. Answers to the others are stripped from later output.
        """
        sent: list[str] = []
        every = PROBE_EVERY_S
        while (left := deadline - time.monotonic()) > 0:
            sent.append(uuid.uuid4().hex[:12])
            await chan.write(f"{_marker_cmd(sent[-1])}\n".encode())
            probes = re.compile(rf"\n?__PGEND_({'|'.join(sent)})_(\d+)__\n")
            m = await self._wait_for(probes, min(every, left))
            if m is not None:
                return m
            every = min(every * 2, PROBE_EVERY_MAX_S)
        return None


PROBE_EVERY_S = 1.0
"""First interval between probes after an interrupt (it doubles, up to the max below);
how long the session waits in all is :func:`interrupt_grace_s` / :func:`kill_answer_s`."""
PROBE_EVERY_MAX_S = 8.0


def interrupt_grace_s(timeout: float) -> float:
    """How long Ctrl-C has to end a timed-out command: half its timeout, 1 to 30 s."""
    return min(max(timeout / 2, 1.0), 30.0)


def kill_answer_s(timeout: float) -> float:
    """How long the shell has to answer once the foreground job was killed (a busy machine
    may take seconds): at least 60 s, or the command's timeout when longer."""
    return max(60.0, timeout)


_ANY_MARKER = re.compile(r"\n?__PGEND_[0-9a-f]{12}_\d+__\n")


def _marker_cmd(nonce: str) -> str:
    return f"printf '\\n__PGEND_%s_%s__\\n' {nonce} $?"


def _marker(nonce: str) -> re.Pattern[str]:
    return re.compile(rf"\n?__PGEND_{nonce}_(\d+)__\n")
