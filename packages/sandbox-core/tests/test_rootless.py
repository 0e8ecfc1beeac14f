"""The launching thread's own identity (``rootless.thread_identity``), as root."""

from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from patchgym_sandbox import SandboxSpec, create_backend
from patchgym_sandbox.local import rootless
from patchgym_sandbox.local.backend import LocalBackend, LocalSandbox
from patchgym_sandbox.local.ownthread import in_own_thread

pytestmark = pytest.mark.skipif(
    not rootless.thread_identity_supported(), reason="needs a root driver on x86_64/aarch64"
)
STATUS = "grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapAmb):' /proc/self/status"


def _status(text: str) -> dict[str, list[str]]:
    return {k: v.split() for k, _, v in (line.partition(":") for line in text.splitlines())}


def test_a_child_started_under_it_is_the_sandbox_uid_for_good_and_the_driver_is_unchanged() -> None:
    seen: dict[str, str] = {}

    def launch() -> None:
        with rootless.thread_identity():
            seen["child"] = subprocess.run(["sh", "-c", STATUS], capture_output=True,
                                           text=True, check=True).stdout  # fmt: skip
        seen["thread"] = f"{os.getresuid()} {os.getresgid()} {os.getgroups()}"

    before = (os.getresuid(), os.getresgid(), os.getgroups())
    worker = threading.Thread(target=launch)
    worker.start()
    worker.join()
    child = _status(seen["child"])
    uid = str(rootless.SANDBOX_UID)
    assert child["Uid"] == [uid] * 4 and child["Gid"] == [uid] * 4
    assert child["Groups"] == []
    assert all(int(child[c][0], 16) == 0 for c in ("CapInh", "CapPrm", "CapEff", "CapAmb"))
    assert seen["thread"] == f"{before[0]} {before[1]} {before[2]}"  # the thread is back
    assert (os.getresuid(), os.getresgid(), os.getgroups()) == before  # the others never left
    dumpable = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
    assert dumpable == rootless._DUMPABLE


@pytest.mark.parametrize("name", ["state", "state dir"])  # mountinfo writes a space as \040
async def test_bubblewrap_inherits_no_mount_of_the_open_sandboxes(
    tmp_path: Path, name: str
) -> None:
    """The launcher stages what a sandbox needs, then detaches every mount beneath the
    state dir from its namespace (``private_mounts(detach=...)``): bubblewrap copies and
    reads a mount table that does not grow with the sandboxes open (the others' working
    copies and tmpfs), and the sandbox still has its own."""
    state = tmp_path / name
    backend = create_backend({"type": "local", "state_dir": str(state)})
    if not isinstance(backend, LocalBackend) or backend.sandbox_uid is None:
        pytest.skip("no staging namespace here: the driver is not root")
    template = tmp_path / "template"
    template.mkdir()
    (template / "mine.txt").write_text("mine\n")
    spec = SandboxSpec(template=str(template))
    try:
        async with backend.sandbox(spec) as first, backend.sandbox(spec) as second:
            assert isinstance(second, LocalSandbox) and second._server is not None
            inside = str(state.resolve()) + "/"
            here = rootless._mount_points("/proc/self/mountinfo")
            assert len([p for p in here if p.startswith(inside)]) >= 2  # both working copies
            launcher = rootless._mount_points(f"/proc/{second._server.proc.pid}/mountinfo")
            assert not [p for p in launcher if p.startswith(inside)], launcher
            for sb in (first, second):
                assert (await sb.exec("cat mine.txt")).stdout == "mine\n"
    finally:
        await backend.aclose()


async def test_bubblewrap_inherits_no_host_mount_it_has_no_use_for(tmp_path: Path) -> None:
    """Host mounts bubblewrap reaches by no path (here one beneath ``/tmp``, which the
    stage covers, and one outside it) leave the launcher's namespace; what it does reach
    stays (``/proc``, ``/dev``, the stage and what is staged on it), and a sandbox over a
    source beneath such a mount still sees that source."""
    elsewhere = Path(tempfile.mkdtemp(dir="/var/tmp"))
    hidden, source = tmp_path / "hidden", tmp_path / "source"
    (source / "template").mkdir(parents=True)
    (source / "template" / "mine.txt").write_text("mine\n")
    hidden.mkdir()
    mounted: list[Path] = []
    try:  # bind mounts: a template view (idmapped) of a tmpfs needs Linux >= 6.3
        for src, point in ((elsewhere, elsewhere), (source, hidden)):
            subprocess.run(["mount", "--bind", str(src), str(point)], check=True)
            mounted.append(point)
        backend = create_backend({"type": "local", "state_dir": str(tmp_path / "state")})
        if not isinstance(backend, LocalBackend) or backend.sandbox_uid is None:
            pytest.skip("no staging namespace here: the driver is not root")
        try:
            async with backend.sandbox(SandboxSpec(template=str(hidden / "template"))) as sb:
                assert isinstance(sb, LocalSandbox) and sb._server is not None
                launcher = rootless._mount_points(f"/proc/{sb._server.proc.pid}/mountinfo")
                for point in mounted:
                    assert str(point.resolve()) not in launcher, launcher
                assert {"/", "/proc", "/dev", str(rootless.STAGE)} <= set(launcher), launcher
                assert (await sb.exec("cat mine.txt")).stdout == "mine\n"
        finally:
            await backend.aclose()
    finally:
        for point in reversed(mounted):
            subprocess.run(["umount", "-l", str(point)], check=False)
        os.rmdir(elsewhere)


def test_a_backend_finalizer_in_a_thread_with_its_own_mounts_leaves_the_unmount_for_later(
    tmp_path: Path,
) -> None:
    """A dropped backend's finalizer may run (a garbage collection) in a launcher thread,
    whose mount namespace is its own: it cannot unmount the host's ``/etc`` copy there, so
    the next call from a thread that sees the host's mounts does."""
    from patchgym_sandbox.local import backend as local_backend

    target = tmp_path / "etc-1-x"
    target.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "t", str(target)], check=True)
    try:

        def private() -> None:
            rootless._check(rootless._libc.unshare(rootless.CLONE_NEWNS), "unshare")
            local_backend._unmount_all([target])

        in_own_thread(private, "private-mounts")
        assert os.path.ismount(target)  # the host's: out of that thread's reach
        local_backend._unmount_all([])
        assert not os.path.ismount(target) and not target.exists()
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False, capture_output=True)
