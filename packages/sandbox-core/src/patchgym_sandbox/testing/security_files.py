"""Security attacks on the driver's own work: files a policy planted, output it never ends.

Part of :class:`~patchgym_sandbox.testing.security.SandboxSecurity` (same fixtures, same
``cannot_prevent`` skips). A FIFO, socket or device named like a source file, and a short
link to a huge file, are handed to every file operation of the sandbox API: each must end
promptly with a typed refusal (:class:`NotARegularFile`, :class:`FileTooLarge`, or a
path error), never hang the driver or pull the target whole into its memory. A shell
session running a command that prints forever must keep a bounded buffer and stay usable.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import ClassVar

import pytest

from patchgym_sandbox.errors import (
    FileTooLarge,
    NotARegularFile,
    SandboxError,
    SandboxFileNotFound,
)
from patchgym_sandbox.sandbox import Sandbox
from patchgym_sandbox.sessionbuf import HEAD_CHARS, TAIL_CHARS

SPECIALS = (
    "mkfifo fifo.py; ln -s fifo.py fifo-link.py; "
    "truncate -s 1536M huge.bin; ln -s huge.bin small-link.py; "
    "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock.py')\"; "
    "ln -s /dev/zero zero.py; ln -s /dev/tty tty.py"
)
"""Planted in the working copy: a FIFO, a 1.5 GB sparse file behind a 7-byte link, a
socket, and links to endless devices, all named like source files."""
DEADLINE_S = 60.0
"""Far past what a refusal takes; a hang is what the limit catches, not slowness."""


class FileAttacks:
    """Mixed into the security suite; ``attack`` and ``sb`` come from it."""

    specials_reach_driver: ClassVar[bool] = True
    """False where the FIFOs and sockets a sandbox makes never exist on the driver's side
    (gVisor keeps them in its user-space kernel): the driver then finds no such file."""

    def attack(self, name: str) -> None:
        raise NotImplementedError

    async def _refused(self, what: str, call: Awaitable[object]) -> BaseException:
        try:
            await asyncio.wait_for(call, DEADLINE_S)
        except TimeoutError:
            pytest.fail(f"{what} hung for {DEADLINE_S:g} s on a planted special file")
        except (SandboxError, OSError) as exc:
            return exc
        pytest.fail(f"{what} succeeded on a planted special file")

    @pytest.mark.asyncio
    async def test_file_api_on_special_files(self, sb: Sandbox) -> None:
        self.attack("file_api_on_special_files")
        r = await sb.exec(SPECIALS, timeout=60)
        assert (await sb.exec("test -p fifo.py && test -L small-link.py", timeout=30)).ok, r.output
        for name in ("fifo.py", "fifo-link.py", "sock.py", "zero.py", "tty.py"):
            exc = await self._refused(f"read_file({name!r})", sb.read_file(name))
            assert not isinstance(exc, FileTooLarge), f"read_file({name!r}) read a device"
        fifo = await self._refused("read_file('fifo.py')", sb.read_file("fifo.py"))
        refusal = NotARegularFile if self.specials_reach_driver else SandboxFileNotFound
        assert isinstance(fifo, refusal), f"a FIFO is refused as such, got {fifo!r}"
        for name in ("small-link.py", "huge.bin"):
            exc = await self._refused(f"read_file({name!r})", sb.read_file(name))
            assert isinstance(exc, FileTooLarge), f"read_file({name!r}): {exc!r}"
            capped = sb.read_file(name, max_bytes=1 << 20)
            exc = await self._refused(f"read_file({name!r}, 1 MiB)", capped)
            assert isinstance(exc, FileTooLarge) and exc.limit == 1 << 20
        assert (await sb.exec("test -p fifo.py", timeout=30)).ok, "a read replaced the FIFO"
        for name in ("fifo.py", "fifo-link.py", "sock.py"):  # refused, or replaced (docker's
            try:  # archive extraction swaps the node for a file): never written into, no hang
                await asyncio.wait_for(sb.write_file(name, "pwned\n"), DEADLINE_S)
            except TimeoutError:
                pytest.fail(f"write_file({name!r}) hung for {DEADLINE_S:g} s on a special file")
            except (SandboxError, OSError):
                pass
        with contextlib.suppress(SandboxError, OSError):
            await sb.exec("rm -f huge.bin", timeout=30)

    @pytest.mark.asyncio
    async def test_unbounded_session_output(self, sb: Sandbox) -> None:
        self.attack("unbounded_session_output")
        cap = HEAD_CHARS + TAIL_CHARS + 65536  # + the chunk that held the end marker
        async with sb.session() as sh:
            res = await sh.run(
                "yes pg-flood-line | head -c 8000000; echo; echo pg-end", timeout=300
            )
            assert not res.timed_out and res.exit_code == 0
            assert len(res.output) <= cap, f"{len(res.output)} characters kept, cap {cap}"
            assert "characters of output dropped" in res.output
            assert res.output.startswith("pg-flood-line") and res.output.endswith("pg-end\n")
            forever = await sh.run("yes pg-flood-line", timeout=5)
            assert forever.timed_out and len(forever.output) <= cap
            again = await sh.run("echo still-usable", timeout=60)
            assert again.output.strip().endswith("still-usable") and again.exit_code == 0
