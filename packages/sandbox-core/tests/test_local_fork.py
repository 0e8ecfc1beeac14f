"""``Sandbox.fork`` on the local backend: the shared snapshot, its removal and its reaping,
and the generic (workdir-only) path run explicitly. The behaviour every backend shares is
in the conformance suite (``ForkConformance``)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from patchgym_sandbox import SandboxSpec, create_backend
from patchgym_sandbox import labels as L
from patchgym_sandbox.backend import SandboxBackend
from patchgym_sandbox.fork import fork_workdir
from patchgym_sandbox.local import forks
from patchgym_sandbox.sandbox import Sandbox

MODES = [
    {"copy_mode": "auto"},
    {"copy_mode": "copy"},
    {"isolation": "none"},
]


@pytest_asyncio.fixture(params=MODES, ids=["overlay", "copy", "unisolated"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SandboxBackend]:
    b = create_backend({"type": "local", "state_dir": str(tmp_path / "state"), **request.param})
    yield b
    await b.aclose()


@pytest_asyncio.fixture
async def parent(backend: SandboxBackend, template_repo: Path) -> AsyncIterator[Sandbox]:
    """A started sandbox of the template (closed after the test)."""
    async with backend.sandbox(SandboxSpec(template=str(template_repo))) as sb:
        yield sb


def snapshots(backend: SandboxBackend) -> list[Path]:
    root = Path(backend.config.state_dir) / forks.FORKS  # type: ignore[attr-defined]
    return sorted(root.iterdir()) if root.is_dir() else []


@pytest.mark.asyncio
async def test_the_last_child_removes_the_snapshot(
    backend: SandboxBackend, parent: Sandbox
) -> None:
    await parent.exec("echo built > build.txt")
    kids = await parent.fork(3)
    (snap,) = snapshots(backend)
    assert sorted(p.name for p in (snap / "refs").iterdir()) == sorted(k.id for k in kids)
    await kids[0].close()
    await kids[1].close()
    assert snapshots(backend) == [snap]
    assert (await kids[2].read_text("build.txt")) == "built\n"
    await kids[2].close()
    assert snapshots(backend) == []


@pytest.mark.asyncio
async def test_a_child_cannot_change_the_shared_snapshot(
    backend: SandboxBackend, parent: Sandbox, template_repo: Path
) -> None:
    await parent.exec("echo built > build.txt && mkdir -p d && echo 1 > d/f && echo t > $TMPDIR/t")
    kids = await parent.fork(2)
    (snap,) = snapshots(backend)
    before = sorted(str(p.relative_to(snap)) for p in snap.rglob("*") if "refs" not in p.parts)
    attack = (
        "echo evil > build.txt; echo evil >> pkg/__init__.py; rm -rf d; echo evil > $TMPDIR/t;"
        "chmod 000 README.md; ln -sf /etc/passwd build2.txt; mv pkg pkg2"
    )
    await kids[0].exec(attack)
    sibling = kids[1]
    assert (await sibling.read_text("build.txt")) == "built\n"
    assert (await sibling.read_text("d/f")) == "1\n"
    assert (await sibling.read_text("pkg/__init__.py")) == "VALUE = 1\n"
    assert (await sibling.exec("cat $TMPDIR/t")).stdout == "t\n"
    after = sorted(str(p.relative_to(snap)) for p in snap.rglob("*") if "refs" not in p.parts)
    assert after == before
    assert (snap / "root" / "build.txt").read_text() == "built\n"
    assert (snap / "tmp" / "t").read_text() == "t\n"
    assert (template_repo / "pkg" / "__init__.py").read_text() == "VALUE = 1\n"
    await asyncio.gather(*(k.close() for k in kids))


@pytest.mark.asyncio
async def test_a_fork_of_a_fork_and_the_generic_path(
    backend: SandboxBackend, parent: Sandbox
) -> None:
    # a deleted template file (a whiteout) and a replaced directory (an opaque one)
    prep = "echo 1 > one.txt && rm README.md && rm -r pkg && mkdir pkg && echo 2 > pkg/new"
    await parent.exec(f"{prep} && echo t > $TMPDIR/t")
    (kid,) = await parent.fork(1)
    seen = await kid.exec("ls pkg; test -e README.md")
    assert seen.stdout == "new\n" and not seen.ok, seen
    await kid.exec("echo 2 > two.txt")
    grandkids = await kid.fork(2)
    await kid.close()  # the grandchildren do not depend on their parent's snapshot
    for g in grandkids:
        assert (await g.exec("cat one.txt two.txt")).stdout == "1\n2\n"
        assert not (await g.exec("test -e README.md")).ok
    generic = await fork_workdir(grandkids[0], grandkids[0].spec, 2)
    for g in generic:  # the workdir only: deletions kept, the private /tmp not carried
        assert (await g.exec("cat one.txt two.txt")).stdout == "1\n2\n"
        assert not (await g.exec("test -e README.md")).ok
        assert not (await g.exec("test -e $TMPDIR/t")).ok
    await asyncio.gather(*(b.close() for b in [*grandkids, *generic]))
    assert snapshots(backend) == []


@pytest.mark.asyncio
async def test_reap_removes_the_children_and_their_snapshot(
    backend: SandboxBackend, template_repo: Path, tmp_path: Path
) -> None:
    run = f"fork-reap-{uuid.uuid4().hex[:8]}"
    parent = await backend.sandbox(SandboxSpec(template=str(template_repo), run_id=run)).start()
    await parent.exec("echo built > build.txt")
    await parent.fork(3)  # never closed: the driver "crashed"
    # a snapshot a killed driver left before any child existed
    state = Path(backend.config.state_dir)  # type: ignore[attr-defined]
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    (tmp_path / "layer").mkdir()
    orphan = forks.take(state, {"root": tmp_path / "layer"}, layered=False, children=["pg-x"])
    (orphan.path / "driver").write_text(dead)
    other = create_backend(backend.config.node())  # a new driver
    try:
        removed = await other.reap({L.RUN_ID: run})
    finally:
        await other.aclose()
    assert len(removed) == 4
    assert snapshots(backend) == []
