"""``patchgym_sandbox.supervisor.supervise``: how it finds ``bash`` (looked up once per
``PATH`` value, as a shell hashes commands) keeps what the command sees."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchgym_sandbox import supervisor
from patchgym_sandbox.output import OutputCapture
from patchgym_sandbox.result import ExecResult


def run(cmd: str, path: str, cwd: str = "/") -> ExecResult:
    capture = OutputCapture(1 << 20)
    env = {"PATH": path, "HOME": "/tmp"}
    return capture.result(supervisor.supervise(cmd, capture.feed, cwd=cwd, env=env, timeout=30))


def test_argv0_stays_bash() -> None:
    assert run('echo "$0"', os.environ["PATH"]).stdout == "bash\n"


def test_shell_is_the_bash_that_runs_the_command_unless_given() -> None:
    path = os.environ["PATH"]
    r = run('[ "$SHELL" = "$BASH" ] && echo "$SHELL"', path)
    assert r.stdout == f"{shutil.which('bash', path=path)}\n", r
    capture = OutputCapture(1 << 20)
    env = {"PATH": path, "SHELL": "/bin/mine"}
    status = supervisor.supervise('echo "$SHELL"', capture.feed, env=env, timeout=30)
    assert capture.result(status).stdout == "/bin/mine\n"
    assert env == {"PATH": path, "SHELL": "/bin/mine"}  # the caller's dict is left alone


def test_a_bash_gone_since_it_was_found_is_looked_up_again(tmp_path: Path) -> None:
    real = shutil.which("bash")
    assert real is not None
    first = tmp_path / "first"
    first.mkdir()
    (first / "bash").symlink_to(real)
    path = f"{first}:{os.path.dirname(real)}"
    assert run("echo one", path).stdout == "one\n"
    assert supervisor._BASH[path] == str(first / "bash")
    (first / "bash").unlink()
    again = run("echo two", path)
    assert (again.exit_code, again.stdout) == (0, "two\n")
    assert run("echo three", path).stdout == "three\n"
    assert supervisor._BASH[path] == os.path.join(os.path.dirname(real), "bash")


def test_relative_path_entries_are_not_remembered(tmp_path: Path) -> None:
    real = shutil.which("bash")
    assert real is not None
    path = f".:{os.path.dirname(real)}"
    res = run('echo "$0"', path, cwd=str(tmp_path))
    assert (res.exit_code, res.stdout) == (0, "bash\n")
    assert path not in supervisor._BASH


def test_missing_cwd_is_still_an_error() -> None:
    capture = OutputCapture(1 << 20)
    try:
        supervisor.supervise("true", capture.feed, cwd="/nonexistent-dir", env=dict(os.environ))
    except FileNotFoundError as exc:
        assert "nonexistent-dir" in str(exc)
    else:
        raise AssertionError("a missing cwd must raise")


def test_the_exit_after_the_pipes_close_wakes_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pipes close a moment before the command is reaped: with a deadline, the wait
    sleeps on the command's pidfd, not in polls (each cost up to 1 ms of every exec)."""
    slept: list[float] = []
    monkeypatch.setattr(supervisor.time, "sleep", slept.append)
    for i in range(50):
        assert run(f"exit {i % 3}", os.environ["PATH"]).exit_code == i % 3
    assert slept == []


def test_a_command_that_closes_its_pipes_keeps_its_deadline() -> None:
    capture = OutputCapture(1 << 20)
    status = supervisor.supervise("exec >&- 2>&-; sleep 30", capture.feed, timeout=1)
    assert capture.result(status).timed_out


def _state(pid: int) -> bytes:
    """The state letter of ``pid``'s ``stat`` (the process must not have been reaped)."""
    return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]


def test_a_killed_group_member_counts_until_it_is_dead() -> None:
    """``kill_tree`` waits for the command's group as well as for the token: a member whose
    ``environ`` no longer reads (exiting, or never carrying the token) is counted while it
    is not a zombie, so the kill returns only once it is dead."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True, env={"PATH": os.defpath})
    try:
        assert proc.pid in supervisor._pids_with_token("PATCHGYM_T", "none", proc.pid)
        assert proc.pid not in supervisor._pids_with_token("PATCHGYM_T", "none")
        assert supervisor.kill_tree(proc.pid, "PATCHGYM_T", "none") == 0
        state = _state(proc.pid)
        assert state in (b"Z", b"X"), "kill_tree returned before the member died"
        assert proc.pid not in supervisor._pids_with_token("PATCHGYM_T", "none", proc.pid)
    finally:
        proc.kill()
        proc.wait()


HOLD_MEMORY = """
import mmap, sys
m = mmap.mmap(-1, 1 << 30)
m.madvise(mmap.MADV_NOHUGEPAGE)  # 262,144 pages of 4 KiB to release at the exit
for i in range(0, 1 << 30, 1 << 20):
    m[i : i + (1 << 20)] = b"x" * (1 << 20)
print("ready", flush=True)
sys.stdin.read()
"""


def test_a_killed_token_carrier_counts_until_it_is_dead() -> None:
    """A process found by its token (``setsid``: outside the command's group) is waited for
    until it is dead, not only until its ``environ`` reads empty: that happens as its exit
    releases its memory, while it still runs (here, for the time 1 GiB of small pages takes)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_MEMORY],
        start_new_session=True,
        env={"PATH": os.defpath, "PATCHGYM_T": "carrier"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        assert supervisor.kill_tree(None, "PATCHGYM_T", "carrier") == 0
        state = _state(proc.pid)
        assert state in (b"Z", b"X"), "kill_tree returned before it died"
    finally:
        proc.kill()
        proc.communicate()


FREEZER_V1 = Path("/sys/fs/cgroup/freezer")


@pytest.mark.skipif(
    os.geteuid() != 0 or not (FREEZER_V1 / "tasks").exists(),
    reason="needs root and the cgroup v1 freezer (a v2-frozen task dies of SIGKILL)",
)
def test_a_process_that_outlives_its_kill_is_reported(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A command's background process frozen in a v1 freezer cgroup (as a task stuck in
    ``D`` would be) survives SIGKILL until thawed: the result counts it as ``unkilled``
    after ``KILL_WAIT_S`` instead of saying nothing; once thawed it dies."""
    monkeypatch.setattr(supervisor, "KILL_WAIT_S", 0.5)
    group = FREEZER_V1 / f"patchgym-test-{os.getpid()}-{tmp_path.name}"
    group.mkdir()
    frozen: list[int] = []

    def on_chunk(stream: int, data: bytes) -> None:
        capture.feed(stream, data)
        if stream == 1 and not frozen:
            frozen.append(int(data.split()[0]))
            (group / "tasks").write_text(str(frozen[0]))
            (group / "freezer.state").write_text("FROZEN")

    capture = OutputCapture()
    try:
        status = supervisor.supervise("sleep 60 & echo $!; wait", on_chunk, timeout=1.0)
        result = capture.result(status)
        assert frozen and result.timed_out
        assert result.unkilled == 1, result
    finally:
        (group / "freezer.state").write_text("THAWED")
        deadline = time.monotonic() + 30
        while (group / "tasks").read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.01)  # the pending SIGKILL lands once thawed
        group.rmdir()
    plain = OutputCapture()
    status = supervisor.supervise("sleep 60 & echo $!; wait", plain.feed, timeout=0.5)
    assert plain.result(status).unkilled == 0 and "unkilled" not in status


@pytest.mark.parametrize("sent", ["3", -1, True, None, 2.5, [1]])
def test_a_malformed_unkilled_count_reads_as_zero(sent: object) -> None:
    """The status line crosses the sandbox boundary: a forged extra field fails nothing."""
    status = {"exit_code": 0, "timed_out": False, "idle_timed_out": False, "duration_s": 0.1}
    assert OutputCapture().result({**status, "unkilled": sent}).unkilled == 0
    assert OutputCapture().result({**status, "unkilled": 2}).unkilled == 2
