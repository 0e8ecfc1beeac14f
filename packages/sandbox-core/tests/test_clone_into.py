"""clone3(CLONE_INTO_CGROUP) spawning (local/clone_into.py) on a real cgroup2 hierarchy.

Runs where this machine has a writable cgroup2 mount: the unified hierarchy of a hybrid
host (``/sys/fs/cgroup/unified``) or a v2-only one (the ``tests-cgroup-v2`` guest, where
the local backend's own tests also start every sandbox this way).
"""

from __future__ import annotations

import os
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchgym_sandbox.local import clone_into

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
