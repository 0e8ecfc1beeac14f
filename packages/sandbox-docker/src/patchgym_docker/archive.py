"""Tar streams for the Engine's archive endpoints (``put_archive`` / ``get_archive``)."""

from __future__ import annotations

import contextlib
import io
import posixpath
import queue
import tarfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from patchgym_sandbox import tarsafe
from patchgym_sandbox.errors import FileTooLarge, NotARegularFile, SandboxFileNotFound


def files_tar(files: Mapping[str, tuple[bytes, int]]) -> bytes:
    """An uncompressed tar of regular files: ``{name: (data, mode)}`` (names relative)."""
    buf = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, (data, mode) in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode
            info.mtime = int(now)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def split(path: str) -> tuple[str, str]:
    """``/a/b/c`` -> (``/a/b``, ``c``)."""
    parent, name = posixpath.split(posixpath.normpath(path))
    return parent or "/", name


class ChunkReader(io.RawIOBase):
    """A file-like view of an iterator of byte chunks, for ``tarfile`` stream mode."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._it: Iterator[bytes] = iter(chunks)
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]  # RawIOBase types readinto's buffer wider than the tar reader needs
        while not self._buf:
            try:
                self._buf = next(self._it)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


class Symlink(Exception):
    """The archived path is a symbolic link to ``target`` (resolved against its parent)."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.target = target


def _kind(member: tarfile.TarInfo) -> str:
    if member.isdir():
        return "a directory"
    if member.isfifo():
        return "a FIFO (named pipe)"
    if member.ischr():
        return "a character device"
    if member.isblk():
        return "a block device"
    return "not a regular file"


def single_file(chunks: Iterable[bytes], path: str, max_bytes: int) -> bytes:
    """The content of the one regular file in a ``get_archive`` stream of ``path``.

    The tar header is checked before any content is read: a FIFO, device or directory is
    :class:`NotARegularFile`, a file over ``max_bytes`` :class:`FileTooLarge` (the rest of
    the stream is dropped unread when the caller closes it).
    """
    with tarfile.open(fileobj=io.BufferedReader(ChunkReader(chunks)), mode="r|") as tar:
        for member in tar:
            if member.issym():
                raise Symlink(posixpath.join(split(path)[0], member.linkname))
            if not member.isfile():
                kind = _kind(member)
                raise NotARegularFile(
                    f"{path!r} is {kind}; read_file reads regular files", kind=kind
                )
            if member.size > max_bytes:
                raise FileTooLarge(
                    f"{path!r} is {member.size} bytes, over the {max_bytes}-byte read limit",
                    size=member.size,
                    limit=max_bytes,
                )
            fh = tar.extractfile(member)
            assert fh is not None
            return fh.read()
    raise SandboxFileNotFound(f"no file {path!r} (empty archive)")


class _QueueWriter(io.RawIOBase):
    """``tarfile`` writes here; full chunks go to a bounded queue (back-pressure)."""

    def __init__(self, put: Callable[[bytes], None], chunk: int) -> None:
        self._put = put
        self._chunk = chunk
        self._buf = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self._buf += b
        while len(self._buf) >= self._chunk:
            self._put(bytes(self._buf[: self._chunk]))
            del self._buf[: self._chunk]
        return len(b)

    def flush_all(self) -> None:
        if self._buf:
            self._put(bytes(self._buf))
            self._buf.clear()


def tar_stream(src: Path, arcname: str, *, chunk: int = 1 << 20, depth: int = 8) -> Iterator[bytes]:
    """Lazily tar ``src`` (file or directory) as ``arcname``; at most ``depth`` chunks in memory.

    A producer thread writes the tar; the generator yields its chunks. Closing the
    generator early (a failed upload) stops the producer.
    """
    chunks: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: bytes | BaseException | None) -> None:
        while not stop.is_set():
            try:
                chunks.put(item, timeout=0.2)
                return
            except queue.Full:
                continue
        raise _Stopped

    def produce() -> None:
        try:
            sink = _QueueWriter(put, chunk)
            with tarfile.open(fileobj=sink, mode="w|") as tar:
                tar.add(str(src), arcname=arcname)
            sink.flush_all()
            put(None)
        except _Stopped:
            return
        except BaseException as exc:
            with contextlib.suppress(_Stopped):
                put(exc)

    producer = threading.Thread(target=produce, name="patchgym-docker-tar", daemon=True)
    producer.start()
    try:
        while True:
            item = chunks.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


class _Stopped(Exception):
    pass


def extract_as(chunks: Iterable[bytes], dest: Path) -> None:
    """Extract a ``get_archive`` stream so that its single top entry becomes ``dest``.

    The stream comes from an untrusted sandbox: :func:`patchgym_sandbox.tarsafe.within`
    refuses names or links that leave ``dest``, devices and set-id bits; a refused member
    is :class:`~patchgym_sandbox.errors.PathOutsideSandbox`.
    """
    with tarfile.open(fileobj=io.BufferedReader(ChunkReader(chunks)), mode="r|") as tar:
        root: str | None = None
        for member in tar:
            if root is None:
                root = member.name.split("/", 1)[0]
                dest.parent.mkdir(parents=True, exist_ok=True)
            rel = member.name[len(root) :].lstrip("/")
            member.name = str(Path(dest.name) / rel) if rel else dest.name
            try:
                tar.extract(member, dest.parent, filter=tarsafe.within(dest))
            except tarfile.FilterError as exc:
                raise tarsafe.refused(exc, dest) from exc
