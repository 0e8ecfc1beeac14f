"""clone3(CLONE_INTO_CGROUP) spawning (local/clone_into.py) on a real cgroup2 hierarchy.

Runs where this machine has a writable cgroup2 mount: the unified hierarchy of a hybrid
host (``/sys/fs/cgroup/unified``) or a v2-only one (the ``tests-cgroup-v2`` guest, where
the local backend's own tests also start every sandbox this way).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchgym_sandbox.local import clone_into, rootless

ENV = {"PATH": "/usr/bin:/bin"}


def _cgroup2_root() -> Path | None:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if fields[2] == "cgroup2" and os.access(fields[1], os.W_OK):
            return Path(fields[1])
    return None


pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or _cgroup2_root() is None or not clone_into.supported(),
    reason="needs root, a writable cgroup2 mount and Linux >= 5.9",
)


@pytest.fixture
def group() -> Iterator[tuple[Path, int]]:
    root = _cgroup2_root()
    assert root is not None
    d = root / f"pg-clone-test-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield d, fd
    finally:
        os.close(fd)
        d.rmdir()


def test_child_is_born_in_the_group_with_only_its_descriptors(group: tuple[Path, int]) -> None:
    d, fd = group
    keep_r, keep_w = os.pipe()
    try:
        proc = clone_into.CgroupPopen(
            ["sh", "-c", "grep '^0::' /proc/self/cgroup; ls /proc/self/fd"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=ENV, pass_fds=(keep_w,), start_new_session=True, cgroup_fd=fd,
        )  # fmt: skip
        out, err = proc.communicate(b"")
    finally:
        os.close(keep_r)
        os.close(keep_w)
    assert proc.returncode == 0, err
    lines = out.decode().split()
    assert lines[0] == f"0::/{d.name}"
    fds = {int(x) for x in lines[1:]}
    # 0-2, the inherited pass_fd, and ls's own directory handle: nothing else of ours
    assert fds - {0, 1, 2, keep_w} and len(fds - {0, 1, 2, keep_w}) == 1


def test_child_takes_the_uid_and_no_groups(group: tuple[Path, int]) -> None:
    _, fd = group
    proc = clone_into.CgroupPopen(
        ["sh", "-c", "id -u; id -g; id -G; grep -E '^Cap(Prm|Eff)' /proc/self/status"],
        stdout=subprocess.PIPE, env=ENV, cgroup_fd=fd, uid=100000,
    )  # fmt: skip
    out = proc.communicate()[0].decode().split("\n")
    assert proc.returncode == 0
    assert out[0] == "100000" and out[1] == "100000" and out[2] == "100000"
    assert all(line.split()[1] == "0000000000000000" for line in out[3:5])


def test_a_missing_program_is_an_oserror_and_leaves_no_child(group: tuple[Path, int]) -> None:
    _, fd = group
    with pytest.raises(FileNotFoundError):
        clone_into.CgroupPopen(["/nonexistent/program"], env=ENV, cgroup_fd=fd)
    with pytest.raises(ValueError, match="preexec_fn"):
        clone_into.CgroupPopen(["true"], env=ENV, cgroup_fd=fd, preexec_fn=lambda: None)


def test_many_spawns_while_other_threads_allocate(group: tuple[Path, int]) -> None:
    """Other threads hold the allocator and the interpreter's lock in turns: the child
    (a copy of this process with one thread) must never wait on them."""
    _, fd = group
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            [bytearray(4096) for _ in range(64)]

    threads = [threading.Thread(target=churn) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for _ in range(100):
            proc = clone_into.CgroupPopen(["true"], env=ENV, cgroup_fd=fd)
            assert proc.wait(timeout=60) == 0
    finally:
        stop.set()
        for t in threads:
            t.join()


def test_spawns_while_threads_want_the_interpreter_lock(group: tuple[Path, int]) -> None:
    """Threads that wait for the interpreter's lock while a spawn holds it ask for it
    (after the switch interval): a child cloned from this process would inherit that
    request and wait forever to hand the lock over. Here (a big process, so a slow copy,
    CPU-bound threads) that hung a child within seconds when the driver cloned itself;
    the helper's children never run this interpreter."""
    _, fd = group
    stop = threading.Event()

    def burn() -> None:
        n = 0
        while not stop.is_set():
            n += 1

    ballast = [bytearray(1 << 20) for _ in range(200)]
    threads = [threading.Thread(target=burn) for _ in range(6)]
    for t in threads:
        t.start()
    errors: list[BaseException] = []

    def spawner() -> None:
        try:
            for _ in range(50):
                proc = clone_into.CgroupPopen(["true"], env=ENV, cgroup_fd=fd)
                assert proc.wait(timeout=60) == 0
        except BaseException as exc:
            errors.append(exc)

    spawners = [threading.Thread(target=spawner) for _ in range(4)]
    try:
        for t in spawners:
            t.start()
        for t in spawners:
            t.join(timeout=300)
            assert not t.is_alive(), "a spawn hung"
    finally:
        stop.set()
        for t in threads:
            t.join()
    del ballast
    assert not errors, errors


def test_the_child_sees_the_calling_threads_mounts(group: tuple[Path, int], tmp_path: Path) -> None:
    """The child enters the mount namespace of the thread that spawned it: the local
    backend stages a sandbox's host paths in such a thread's own namespace."""
    _, fd = group
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "marker").write_text("seen")
    out: list[bytes] = []

    def in_own_namespace() -> None:
        (staged,) = rootless.private_mounts([tmp_path / "a"])
        proc = clone_into.CgroupPopen(
            ["cat", str(staged / "marker")], env=ENV, cgroup_fd=fd, stdout=subprocess.PIPE
        )
        out.append(proc.communicate()[0])

    clone_into.HELPER_PROCESS.ensure()
    t = threading.Thread(target=in_own_namespace)
    t.start()
    t.join()
    assert out == [b"seen"]
    assert not (rootless.STAGE / "0" / "marker").exists(), "the staging stayed in that thread"


def test_a_forked_driver_gets_a_helper_of_its_own(group: tuple[Path, int]) -> None:
    """A fork of the driver must not talk to its parent's helper (their requests would
    interleave, and the children would be the parent's): it starts its own."""
    _, fd = group
    clone_into.HELPER_PROCESS.ensure()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the forked copy)
        try:
            code = clone_into.CgroupPopen(["true"], env=ENV, cgroup_fd=fd).wait(timeout=60)
        except BaseException:
            code = 99
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert clone_into.CgroupPopen(["true"], env=ENV, cgroup_fd=fd).wait(timeout=60) == 0


def test_what_is_not_redirected_is_inherited(group: tuple[Path, int]) -> None:
    """As a ``Popen`` child: descriptors 0-2 left alone are the parent's own."""
    _, fd = group
    r, w = os.pipe()
    saved = os.dup(1)
    try:
        os.dup2(w, 1)
        proc = clone_into.CgroupPopen(["echo", "inherited"], env=ENV, cgroup_fd=fd)
        assert proc.wait(timeout=60) == 0
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(w)
    with os.fdopen(r, "rb") as fh:
        assert fh.read() == b"inherited\n"


PARENT_THREAD_DRIVER = r"""
import os, subprocess, sys, threading, time
from patchgym_sandbox.local import clone_into

CHILD = '''
import ctypes, signal, sys
signal.signal(signal.SIGUSR1, lambda *_: print("parent thread ended", flush=True))
ctypes.CDLL(None).prctl(1, int(signal.SIGUSR1))  # PR_SET_PDEATHSIG, as bwrap --die-with-parent
print("up", flush=True)
for line in sys.stdin:
    print(line.strip(), flush=True)
'''
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
started = []

def first_use():  # a pool thread's life: start the sandbox, then end
    clone_into.HELPER_PROCESS.ensure()
    proc = clone_into.CgroupPopen(
        [sys.executable, "-I", "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin"}, cgroup_fd=fd)
    assert proc.stdout.readline() == b"up\n"  # its parent-death signal is set
    started.extend([proc, threading.get_native_id()])

t = threading.Thread(target=first_use)
t.start()
t.join()
proc, tid = started
while os.path.exists(f"/proc/self/task/{tid}"):  # gone once its exit signalled its children
    time.sleep(0.001)  # (not a spin: on a busy 2-core host the exiting thread needs the CPU)
proc.stdin.write(b"ping\n")  # a signal sent before is handled before the answer
proc.stdin.flush()
print(proc.stdout.readline().decode().strip())
proc.stdin.close()
proc.wait(timeout=60)
"""


def test_a_child_outlives_the_thread_that_first_used_the_helper(
    group: tuple[Path, int],
) -> None:
    """``CLONE_PARENT`` makes a child's parent the thread that started the helper, and a
    parent-death signal (bubblewrap's ``--die-with-parent``) fires when that thread ends:
    the helper is started by a thread of the process's own lifetime, never by the pool
    thread that used it first (which killed every cgroup v2 sandbox a loop's executor had
    started, when the loop ended)."""
    d, _ = group
    done = subprocess.run(
        [sys.executable, "-c", PARENT_THREAD_DRIVER, str(d)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["ping"], done.stdout
