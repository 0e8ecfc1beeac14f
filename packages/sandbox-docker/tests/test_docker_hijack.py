"""Output the engine sends right behind an exec's response headers is not lost.

``http.client`` reads a response's headers through a buffer that also takes whatever
follows them, and docker-py hands out the socket beneath that buffer: a fast command's
whole output, with the end of its stream, can sit in the buffer when this process reads
the headers late (a loaded machine; it ended a CI run with "the stream ended early").
Each test here makes the header read late on purpose, so every exec is in that case.
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable, Iterator
from typing import Any

import docker
import pytest

from patchgym_docker.backend import DockerBackend
from patchgym_docker.hijack import Hijacked
from patchgym_docker.sandbox import DockerSandbox
from patchgym_sandbox import SandboxFileError, SandboxSpec, create_backend

LATE_S = 0.3
"""How late each response's headers are read: the command has long finished by then."""


@pytest.fixture
def late_headers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    begin = http.client.HTTPResponse.begin

    def late(self: http.client.HTTPResponse) -> None:
        time.sleep(LATE_S)  # the condition under test, not a wait for an event
        begin(self)

    monkeypatch.setattr(http.client.HTTPResponse, "begin", late)
    yield


def test_a_hijacked_stream_starts_with_what_the_header_read_took(
    engine: docker.DockerClient, test_image: str, late_headers: None
) -> None:
    api = engine.api
    cid = api.create_container(test_image, command=["sleep", "300"])["Id"]
    try:
        api.start(cid)
        for _ in range(3):
            exec_id = api.exec_create(cid, ["sh", "-c", "echo out; echo err >&2"])["Id"]
            stream = Hijacked(api.exec_start(exec_id, socket=True))
            try:
                assert sorted(stream.frames()) == [(1, b"out\n"), (2, b"err\n")]
            finally:
                stream.close()
    finally:
        api.remove_container(cid, force=True)


@pytest.mark.parametrize("mode", ["exec", "server"])
async def test_fast_commands_keep_their_output(
    docker_config: Callable[..., dict[str, Any]], test_image: str, late_headers: None, mode: str
) -> None:
    backend = create_backend(docker_config(exec_mode=mode))
    assert isinstance(backend, DockerBackend)
    try:
        async with backend.sandbox(SandboxSpec(image=test_image)) as sb:
            assert isinstance(sb, DockerSandbox)
            for _ in range(3):
                res = await sb.exec("echo fast")
                assert (res.exit_code, res.stdout) == (0, "fast\n")
            # the server's READY line came with its headers: it was seen, the server is used
            assert (sb._server_slot.current is not None) == (mode == "server")
            async with sb.session() as shell:
                done = await shell.run("echo from-the-shell")
                assert "from-the-shell" in done.output
    finally:
        await backend.aclose()


async def test_a_failed_mkdir_keeps_its_message(
    backend: DockerBackend, test_image: str, late_headers: None
) -> None:
    """The ``mkdir -p`` before an upload reads its output the same way: its error says why."""
    async with backend.sandbox(SandboxSpec(image=test_image)) as sb:
        with pytest.raises(SandboxFileError, match="cannot create directory"):
            await sb.write_file("/proc/nope/x.txt", "y")
