"""``SandboxSpec.start_script`` on k8s: where no derived image can be kept (no registry to
commit to), an image pulled as-is is reduced inside each pod, as the pod's user (root
in such images), before the sandbox is handed out; once per pod, so a warm pool's member
has run it before it is claimed. A failure is ``DeriveFailed`` and leaves no pod."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from patchgym_k8s.backend import K8sBackend
from patchgym_sandbox import DeriveFailed, SandboxSpec, create_backend

SCRIPT = 'id -u > /tmp/start-uid; echo ran >> /tmp/start-runs; echo "$PG_X" > /tmp/start-env'


@pytest_asyncio.fixture
async def backend(k8s_config: Callable[..., dict[str, Any]]) -> AsyncIterator[K8sBackend]:
    b = create_backend(
        k8s_config(container_overrides={"securityContext": {"readOnlyRootFilesystem": False}})
    )
    assert isinstance(b, K8sBackend)
    yield b
    await b.aclose()


def spec_of(image: str, script: str) -> SandboxSpec:
    return SandboxSpec(
        image=image,
        workdir="/testbed",
        run_id="start-script",
        start_script=script,
        env={"PG_X": "x"},
    )


@pytest.mark.asyncio
async def test_start_script_runs_once_as_root_before_the_pod_is_handed_out(
    backend: K8sBackend, test_image: str
) -> None:
    async with backend.sandbox(spec_of(test_image, SCRIPT)) as box:
        res = await box.exec("cat /tmp/start-uid /tmp/start-runs /tmp/start-env")
        assert res.stdout.split() == ["0", "ran", "x"], res


@pytest.mark.asyncio
async def test_a_pool_member_has_run_it_before_it_is_claimed(
    backend: K8sBackend, test_image: str
) -> None:
    async with backend.pool(spec_of(test_image, SCRIPT), size=1) as pool:
        box = await pool.claim()
        try:
            assert (await box.exec("cat /tmp/start-runs")).stdout == "ran\n"
        finally:
            await box.close()


@pytest.mark.asyncio
async def test_a_failing_start_script_fails_the_start_and_leaves_no_pod(
    backend: K8sBackend, test_image: str
) -> None:
    box = backend.sandbox(spec_of(test_image, "echo no such base commit >&2; exit 5"))
    with pytest.raises(DeriveFailed, match=r"exit 5.*no such base commit"):
        await box.start()
    assert box.closed
    left = await backend.list_sandboxes({"patchgym.sandbox-id": box.id})
    assert [i for i in left if i.state != "terminating"] == [], left
