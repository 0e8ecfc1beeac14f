"""The execute-only loader that starts a local sandbox's init (``local/oomguard.py``).

The attack it stops is in the shared security suite (``test_raise_init_oom_score``);
these pin the parts that run on the driver's side.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from patchgym_sandbox import SandboxSpec, create_backend
from patchgym_sandbox.local import oomguard
from patchgym_sandbox.local.backend import LocalSandbox

PYTHON = os.path.realpath(sys.executable)


@pytest.mark.skipif(sys.platform != "linux", reason="ELF executables")
def test_the_interpreter_of_this_python_is_its_ld_so() -> None:
    interp = oomguard.elf_interpreter(PYTHON)
    assert interp is not None and Path(interp).is_file(), interp
    assert "ld" in Path(interp).name


def test_a_script_names_no_interpreter(tmp_path: Path) -> None:
    script = tmp_path / "python3"
    script.write_text('#!/bin/sh\nexec python3 "$@"\n')
    script.chmod(0o755)
    assert oomguard.elf_interpreter(str(script)) is None
    assert oomguard.guarded([str(script), "-c", "1"]) == [str(script), "-c", "1"]
    assert oomguard.loader_fds(str(script)) == ()


@pytest.mark.skipif(sys.platform != "linux", reason="memfd and ELF executables")
def test_the_loader_is_sealed_and_execute_only() -> None:
    (fd,) = oomguard.loader_fds(PYTHON)
    st = os.fstat(fd)
    assert stat.S_IMODE(st.st_mode) == 0o111 and st.st_uid == os.geteuid()
    with pytest.raises(PermissionError):
        os.pwrite(fd, b"x", 0)
    argv = oomguard.guarded([PYTHON, "-c", "1"])
    assert argv == [f"/proc/self/fd/{fd}", PYTHON, "-c", "1"]
    assert oomguard.loader_fds(PYTHON) == (fd,), "made once per process"


def raise_init_score(pid: int) -> str:
    """Raise the init's score from outside as the driver sets it: through the legacy
    ``oom_adj`` (a write of ``oom_score_adj`` with ``CAP_SYS_RESOURCE`` would also raise the
    floor its children inherit, and no command could reset its score then); a raise needs
    no privilege, so this stands in for the -1000 where the tests lack it. The new score."""
    Path(f"/proc/{pid}/oom_adj").write_text("8")
    return Path(f"/proc/{pid}/oom_score_adj").read_text().strip()


async def test_a_score_set_from_outside_is_the_inits_alone(tmp_path: Path) -> None:
    """What the driver sets on the init from outside (-1000 where it has
    CAP_SYS_RESOURCE; a raise, which needs none, stands in for it here) is neither
    inherited by commands and shells nor changeable from inside."""
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    async with backend.sandbox(SandboxSpec()) as sb:
        assert isinstance(sb, LocalSandbox) and sb._server is not None
        score = raise_init_score(sb._server.init_pid)
        probe = "cat /proc/self/oom_score_adj; echo 7 > /proc/1/oom_score_adj || echo refused"
        r = await sb.exec(probe + "; cat /proc/1/oom_score_adj")
        assert r.stdout.split() == ["0", "refused", score], r.output
        async with sb.session() as sh:
            assert (await sh.run("cat /proc/self/oom_score_adj")).output.strip() == "0"


async def test_commands_reset_the_score_and_leave_no_trace(tmp_path: Path) -> None:
    """A protected init's commands reset their score after their ``exec`` (the prelude
    bash reads through ``BASH_ENV``), with no Python in the forked child: the command still
    sees only descriptors 0-2, no ``BASH_ENV``, its own ``$0``, and the sandbox's rlimit."""
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    spec = SandboxSpec(resources={"cpu_time_s": 7})
    async with backend.sandbox(spec) as sb:
        assert isinstance(sb, LocalSandbox) and sb._server is not None
        raise_init_score(sb._server.init_pid)
        # ls writes to a file, not a pipe: a pipeline's pipe is this bash's own fds 3 and 4
        # until it has forked both sides, which a loaded machine shows ls (a CI flake)
        r = await sb.exec(
            "cat /proc/self/oom_score_adj; ls /proc/$$/fd > /tmp/fds; tr '\\n' ' ' < /tmp/fds; "
            'echo; echo "${BASH_ENV-unset} $0 $(ulimit -St) $(ulimit -Ht)"'
        )
        assert r.exit_code == 0 and r.stdout.splitlines() == ["0", "0 1 2 ", "unset bash 7 7"], (
            r.output
        )
        for _ in range(20):  # the same prelude, every time
            assert (await sb.exec("cat /proc/self/oom_score_adj")).stdout == "0\n"
    await backend.aclose()


@pytest.mark.parametrize("env", [{"POSIXLY_CORRECT": "1"}, {"SHELLOPTS": "posix"}])
async def test_a_posix_bash_still_gets_its_score_reset(tmp_path: Path, env: dict[str, str]) -> None:
    """Bash in POSIX mode skips ``BASH_ENV``: such a command's limits are set before its
    ``exec`` instead, so an environment cannot keep the init's score."""
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    async with backend.sandbox(SandboxSpec()) as sb:
        assert isinstance(sb, LocalSandbox) and sb._server is not None
        raise_init_score(sb._server.init_pid)
        r = await sb.exec("cat /proc/self/oom_score_adj", env=env)
        assert r.stdout == "0\n", r.output
    await backend.aclose()


async def test_a_bash_a_command_could_replace_is_not_trusted(tmp_path: Path) -> None:
    """A ``bash`` found in a writable directory could ignore ``BASH_ENV``: a command that
    planted one there (an attack) still starts with its score reset before its ``exec``."""
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    async with backend.sandbox(SandboxSpec()) as sb:
        assert isinstance(sb, LocalSandbox) and sb._server is not None
        plant = "mkdir -p /tmp/bin && printf '#!/bin/sh\\ncat /proc/self/oom_score_adj\\n' > "
        await sb.exec(plant + "/tmp/bin/bash && chmod +x /tmp/bin/bash")
        raise_init_score(sb._server.init_pid)
        r = await sb.exec("ignored", env={"PATH": "/tmp/bin:/usr/bin:/bin"})
        assert r.stdout == "0\n", r.output
    await backend.aclose()


async def test_without_the_loader_the_init_is_still_not_dumpable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no execute-only loader starts the init (a static Python; a driver that is
    not root gets none that helps), the init makes itself non-dumpable (``prctl`` through
    ``_ctypes``, ``nsinit.find_prctl``): commands, root inside with no capabilities, still
    cannot open its descriptors, the pipes to the driver."""
    monkeypatch.setattr(oomguard, "loader_fd", lambda python: None)
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    async with backend.sandbox(SandboxSpec()) as sb:
        assert isinstance(sb, LocalSandbox) and sb._server is not None
        r = await sb.exec("(: </proc/1/fd/0) 2>/dev/null && echo opened || echo refused")
        assert r.stdout == "refused\n", r.output
    await backend.aclose()
