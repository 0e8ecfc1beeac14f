"""cgroup v2 groups: layout detection, kill and event-driven removal, limits on a real v2.

The mechanics (a subtree of our own, ``cgroup.kill``, the wait on ``cgroup.events``) run on
any v2 hierarchy, including the empty one of a hybrid host (``/sys/fs/cgroup/unified``);
limits need the controllers, so those tests run where v2 is the host's layout (the KVM
guest of ``nox -s tests-cgroup-v2``, a GPU node).
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchgym_sandbox import LimitUnavailable, SandboxSpec, create_backend
from patchgym_sandbox.local import cgroup_v2, cgroups
from patchgym_sandbox.local.backend import LocalSandbox
from patchgym_sandbox.local.cgroup_layout import Layout, setup_v2
from patchgym_sandbox.spec import Resources


def _v2_root() -> Path | None:
    for root in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
        if (root / "cgroup.subtree_control").exists():
            return root
    return None


@pytest.fixture
def v2_parent() -> Iterator[Layout]:
    """A fresh delegated parent (``PATCHGYM_CGROUP_PARENT``-style) on whatever v2 is here."""
    root = _v2_root()
    if root is None or not (root / "cgroup.procs").exists():
        pytest.skip("no cgroup v2 hierarchy mounted here")
    parent = root / f"pgtest-{uuid.uuid4().hex[:8]}"
    try:
        parent.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot create a cgroup v2 group here: {exc}")
    try:
        yield setup_v2(root, "/", str(parent))
    finally:
        for d in [*parent.iterdir(), parent]:
            if d.is_dir():
                cgroup_v2.remove(d, 10.0)


def test_layout_is_detected_once_and_described() -> None:
    lay = cgroups.layout()
    assert cgroups.layout() is lay
    assert lay.version in ("v1", "v2", "none")
    assert lay.describe().startswith(("cgroup v1", "cgroup v2", "no cgroup"))


def test_kill_and_removal_end_every_process(v2_parent: Layout) -> None:
    d = cgroup_v2.create(v2_parent, "pg-kill", Resources())
    assert d is not None and d.parent == v2_parent.parent
    # a shell with a detached grandchild: both must die with the group
    proc = subprocess.Popen(["sh", "-c", "setsid sleep 300 & exec sleep 300"])
    try:
        cgroups.add([d], proc.pid)
        assert proc.pid in cgroups.pids([d])
        cgroups.remove([d])  # cgroup.kill, then the wait on cgroup.events
        assert proc.wait(timeout=30) == -9
        assert not d.exists()
    finally:
        proc.kill()
        proc.wait()


def test_removal_of_an_empty_or_gone_group_returns_at_once(v2_parent: Layout) -> None:
    d = cgroup_v2.create(v2_parent, "pg-empty", Resources())
    assert d is not None
    assert cgroup_v2.wait_empty(d, 0.0)
    cgroups.remove([d])
    assert not d.exists()
    cgroups.remove([d])  # already gone: nothing to do


def test_a_limit_without_its_controller_names_the_fix() -> None:
    lay = Layout("v2", Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/patchgym"), frozenset({"pids"}))
    with pytest.raises(LimitUnavailable, match=r"'memory'.*echo \+memory"):
        cgroup_v2.create(lay, "pg-x", Resources(memory_mb=100))


def test_a_subtree_that_cannot_be_made_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    lay = setup_v2(tmp_path, "/", str(tmp_path / "missing"))
    assert lay.parent is None and lay.problem and "PATCHGYM_CGROUP_PARENT" in lay.problem
    assert "unusable" in lay.describe()


v2_host = pytest.mark.skipif(
    cgroups.layout().version != "v2" or not cgroups.layout().controllers,
    reason="the host's layout is not cgroup v2 with controllers",
)


@v2_host
async def test_v2_limits_are_written_and_enforced(tmp_path: Path) -> None:
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    res = Resources(memory_mb=200, pids=64, cpus=0.5)
    async with backend.sandbox(SandboxSpec(resources=res)) as sb:
        assert isinstance(sb, LocalSandbox)
        [d] = sb.cgroup_dirs
        assert (d / "memory.max").read_text().strip() == str(200 * 1024 * 1024)
        assert (d / "pids.max").read_text().strip() == "64"
        assert (d / "cpu.max").read_text().split() == ["50000", "100000"]
        if (d / "memory.swap.max").exists():
            assert (d / "memory.swap.max").read_text().strip() == "0"
        big = await sb.exec(
            "python3 -c 'x = bytearray(600 * 1024 * 1024); x[::4096] = b\"1\" * len(x[::4096])'"
        )
        assert big.exit_code != 0
        await sb.exec("for i in $(seq 200); do sleep 60 >/dev/null 2>&1 & done; true")
        assert len(cgroups.pids([d])) <= 64
        assert int((d / "pids.events").read_text().split()[1]) > 0  # "max N": the limit held
    assert not d.exists()


def test_preflight_row_names_the_layout() -> None:
    from patchgym_sandbox import load_config

    rows = {r.name: r for r in load_config({"type": "local"}).checks()}
    assert rows["cgroups"].detail == cgroups.layout().describe()
    assert "cgroups" not in {
        r.name for r in load_config({"type": "local", "isolation": "none"}).checks()
    }


def test_an_unenforceable_limit_is_an_infra_error() -> None:
    from patchgym_sandbox import InfraError, IsolationUnavailable

    assert issubclass(LimitUnavailable, InfraError)
    assert issubclass(LimitUnavailable, IsolationUnavailable)
