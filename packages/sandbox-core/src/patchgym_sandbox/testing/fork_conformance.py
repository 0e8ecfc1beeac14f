"""``Sandbox.fork`` on a real backend: part of every backend's conformance suite.

Mixed into :class:`~patchgym_sandbox.testing.SandboxConformance`; uses its ``backend`` and
``sandbox_spec`` fixtures. The workdir is carried on every backend; a backend whose fork
also carries files outside it (a snapshot of the whole sandbox) names such a writable
directory in ``fork_outside_workdir``.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import ClassVar

import pytest

from patchgym_sandbox import labels as L
from patchgym_sandbox.backend import SandboxBackend
from patchgym_sandbox.errors import ConfigError, SandboxClosed
from patchgym_sandbox.sandbox import Sandbox
from patchgym_sandbox.spec import SandboxSpec

FORKS = 3


class ForkConformance:
    fork_outside_workdir: ClassVar[str | None] = None
    """A directory outside the workdir that the backend's fork carries (None: workdir only)."""

    async def _prepared(self, backend: SandboxBackend, spec: SandboxSpec) -> Sandbox:
        parent = await backend.sandbox(spec).start()
        prep = "mkdir -p built && echo v1 > built/out.txt && echo gone > deleted.txt"
        if self.fork_outside_workdir:
            prep += f" && echo outside > {self.fork_outside_workdir}/pg-fork.txt"
        assert (await parent.exec(prep)).ok
        assert (await parent.exec("rm deleted.txt")).ok
        return parent

    @pytest.mark.asyncio
    async def test_fork_children_start_from_the_parent_and_stay_apart(
        self, backend: SandboxBackend, sandbox_spec: SandboxSpec
    ) -> None:
        run = f"fork-{uuid.uuid4().hex[:8]}"
        parent = await self._prepared(backend, sandbox_spec.model_copy(update={"run_id": run}))
        try:
            kids = await parent.fork(FORKS, labels={"purpose": "fork-test"})
            assert len({k.id for k in kids} | {parent.id}) == FORKS + 1
            assert all(k.started for k in kids)
            for kid in kids:
                assert (await kid.read_text("built/out.txt")) == "v1\n"
                assert not (await kid.exec("test -e deleted.txt")).ok
                assert kid.spec.labels[L.FORK_OF] == parent.id
                assert kid.spec.labels["purpose"] == "fork-test"
                if self.fork_outside_workdir:
                    out = await kid.exec(f"cat {self.fork_outside_workdir}/pg-fork.txt")
                    assert out.stdout == "outside\n", out
            # a child's writes (new file, changed file, deletion) reach nobody else
            await kids[0].exec("echo mine > own.txt && echo v2 > built/out.txt && rm -r built")
            assert not (await kids[0].exec("test -e built/out.txt")).ok
            for other in [parent, *kids[1:]]:
                assert not (await other.exec("test -e own.txt")).ok
                assert (await other.read_text("built/out.txt")) == "v1\n"
            # the parent's later writes reach no child
            await parent.exec("echo later > later.txt")
            later = await asyncio.gather(*(k.exec("test -e later.txt") for k in kids))
            assert all(not r.ok for r in later)
            assert len(await backend.list_sandboxes({L.RUN_ID: run})) == FORKS + 1
            await asyncio.gather(*(k.close() for k in kids))
            assert (await parent.read_text("built/out.txt")) == "v1\n"
        finally:
            await parent.close()
        assert await backend.list_sandboxes({L.RUN_ID: run}) == []

    @pytest.mark.asyncio
    async def test_fork_needs_a_started_sandbox_and_n_of_one_or_more(
        self, backend: SandboxBackend, sandbox_spec: SandboxSpec
    ) -> None:
        parent = await backend.sandbox(sandbox_spec).start()
        try:
            with pytest.raises(ConfigError):
                await parent.fork(0)
            (kid,) = await parent.fork(1)
            await kid.close()
        finally:
            await parent.close()
        with pytest.raises(SandboxClosed):
            await parent.fork(2)
        with pytest.raises(SandboxClosed):
            await backend.sandbox(sandbox_spec).fork(1)
