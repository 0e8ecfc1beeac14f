"""The interpreter that runs an isolated sandbox's exec server (``local/serverpython.py``)
and the code it is handed (``local/bootcode.py``): chosen by the rules, compiled by that
interpreter, running real sandboxes."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from test_supervisor_pythons import _interpreters

from patchgym_sandbox import SandboxSpec, create_backend
from patchgym_sandbox.local import bootcode, serverpython
from patchgym_sandbox.local.backend import LocalSandbox
from patchgym_sandbox.local.isolation import interpreter_paths

DRIVER = os.path.realpath(sys.executable)


def fake_python(path: Path, first: str, builtins: str, code: int = 0) -> str:
    """An executable answering the probe as an interpreter would."""
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{first}' '{builtins}'\nexit {code}\n")
    path.chmod(0o755)
    return str(path)


Choose = Callable[[str, tuple[str, ...]], str]
UNCACHED: Choose = serverpython._choose.__wrapped__


@pytest.fixture
def choose(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Choose:
    """``_choose`` uncached, with ``tmp_path`` standing in for ``/usr``."""
    monkeypatch.setattr(serverpython, "SYSTEM_PREFIX", str(tmp_path) + "/")
    return UNCACHED


ALL = " ".join(serverpython.SERVER_EXTENSIONS)


def test_a_system_python_with_more_built_in_runs_the_server(tmp_path: Path, choose: Choose) -> None:
    driver = fake_python(tmp_path / "driver", "True", "posix sys select")
    system = fake_python(tmp_path / "python3", "True", ALL)
    assert choose(driver, (system,)) == system


@pytest.mark.parametrize(
    ("first", "builtins", "code", "why"),
    [
        ("True", "select", 0, "no more of the server's modules built in than the driver's"),
        ("False", "x " + ALL, 0, "not a CPython 3.6 or later"),
        ("", "", 1, "a module the server imports is missing (the probe fails)"),
    ],
)
def test_the_driver_keeps_the_server_otherwise(
    tmp_path: Path, choose: Choose, first: str, builtins: str, code: int, why: str
) -> None:
    driver = fake_python(tmp_path / "driver", "True", "select")
    system = fake_python(tmp_path / "python3", first, builtins, code)
    assert choose(driver, (system,)) == driver, why


def test_a_python_outside_the_system_folders_is_never_chosen(tmp_path: Path) -> None:
    """Only ``/usr`` is bound into every sandbox: a candidate elsewhere would not be there."""
    driver = fake_python(tmp_path / "driver", "True", "")
    system = fake_python(tmp_path / "python3", "True", ALL)
    assert UNCACHED(driver, (system,)) == driver


def test_a_missing_candidate_keeps_the_driver(tmp_path: Path, choose: Choose) -> None:
    assert choose(DRIVER, (str(tmp_path / "absent"),)) == DRIVER


def test_an_interpreter_others_could_replace_is_never_run_here(
    tmp_path: Path, choose: Choose
) -> None:
    """The driver runs a candidate (the probe) and a configured interpreter (the compile) on
    its own side: never one writable by others than its owner."""
    driver = fake_python(tmp_path / "driver", "True", "")
    system = fake_python(tmp_path / "python3", "True", ALL)
    (tmp_path / "python3").chmod(0o777)
    assert choose(driver, (system,)) == driver
    argv, fds = bootcode.argv(system, "{}", precompiled=True)
    assert fds == () and argv[4:7] == [bootcode.source(p) for p in bootcode.PARTS]


def test_an_interpreter_that_cannot_compile_gets_the_sources(tmp_path: Path) -> None:
    argv, fds = bootcode.argv(str(tmp_path / "absent"), "{}", precompiled=True)
    assert fds == () and argv[4:7] == [bootcode.source(p) for p in bootcode.PARTS]


async def test_sandboxes_run_their_server_on_the_chosen_python(tmp_path: Path) -> None:
    """The default config: the server runs on ``server_python`` (this machine's
    ``/usr/bin/python3`` where it qualifies), from code compiled once, and serves."""
    chosen = serverpython.server_python(DRIVER)
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    try:
        async with backend.sandbox(SandboxSpec()) as sb:
            assert isinstance(sb, LocalSandbox) and sb._server is not None
            argv = Path(f"/proc/{sb._server.init_pid}/cmdline").read_bytes().split(b"\0")
            assert os.fsencode(chosen) in argv and bootcode.BOOT.encode() in argv
            r = await sb.exec("echo served; cat /proc/1/comm")
            assert r.stdout.split() == ["served", Path(chosen).name[:15]], r.output
    finally:
        await backend.aclose()


PYTHONS = [p for p in _interpreters() if p.id in ("py3.10", "py3.12", "py3.13")]  # type: ignore[attr-defined]
"""Releases other than the driver's (3.11 here), where pyenv has them."""


@pytest.mark.parametrize("python", PYTHONS)
async def test_a_configured_python_gets_the_code_it_compiled(tmp_path: Path, python: str) -> None:
    """A server interpreter of another release than the driver's is handed code that it
    compiled itself (marshal data is read only by its writer), not the sources to compile
    at every start."""
    prefix = str(Path(python).parent.parent)
    readonly = [*map(str, interpreter_paths()), prefix]
    config = {"type": "local", "state_dir": str(tmp_path / "s"), "python": python}
    backend = create_backend({**config, "readonly_paths": readonly})
    try:
        for _ in range(2):  # compiled once, used by both
            async with backend.sandbox(SandboxSpec()) as sb:
                assert isinstance(sb, LocalSandbox) and sb._server is not None
                argv = Path(f"/proc/{sb._server.init_pid}/cmdline").read_bytes().split(b"\0")
                assert python.encode() in argv and bootcode.BOOT.encode() in argv
                assert (await sb.exec("echo served")).stdout == "served\n"
    finally:
        await backend.aclose()
