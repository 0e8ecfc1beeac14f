"""One admission control for every worker of a Ray run: a named actor holds the caps.

``sandbox.max_starting`` / ``sandbox.creates_per_s`` are per backend object; with
``run.executor=ray`` each episode builds its own backend on some worker, so the driver
starts one actor (named after the run) that owns a :class:`LocalAdmission`, and every
worker's backend asks it (:class:`RayAdmission`) before each sandbox start. The caps then
hold across the whole cluster, as a cloud quota or a cluster's start-up capacity needs.
"""

from __future__ import annotations

from typing import Any

from patchgym_sandbox import BackendConfig, LocalAdmission


class AdmissionActor:
    """The state behind the cluster-wide caps (run as an async Ray actor)."""

    def __init__(
        self, max_starting: int | None, creates_per_s: float | None, creates_burst: int | None
    ) -> None:
        self.gate = LocalAdmission(max_starting, creates_per_s, creates_burst)

    async def acquire(self) -> float:
        return await self.gate.acquire()

    async def release(self) -> None:
        await self.gate.release()

    async def stats(self) -> dict[str, float]:
        return {"high_water": self.gate.high_water, "waited_s": self.gate.waited_s}


class RayAdmission:
    """The :class:`~patchgym_sandbox.Admission` a worker's backend uses: asks the actor."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    async def acquire(self) -> float:
        waited: float = await self.handle.acquire.remote()
        return waited

    async def release(self) -> None:
        await self.handle.release.remote()


def actor_name(run_id: str) -> str:
    return f"patchgym-admission-{run_id}"


def start_actor(ray: Any, sandbox: BackendConfig, run_id: str) -> tuple[str, Any] | None:
    """Start (or find) the run's admission actor on the driver: its name and handle (None
    if the config sets no caps). The caller keeps the handle for the run: a named actor
    that is not detached dies with the last handle its owner holds."""
    if sandbox.make_admission() is None:
        return None
    name = actor_name(run_id)
    handle = (
        ray.remote(num_cpus=0, max_concurrency=10_000)(AdmissionActor)
        .options(name=name, get_if_exists=True)
        .remote(sandbox.max_starting, sandbox.creates_per_s, sandbox.creates_burst)
    )
    return name, handle


def join(ray: Any, backend: Any, name: str | None) -> None:
    """On a worker: make ``backend`` ask the run's actor (nothing when the run has no caps)."""
    if name is not None:
        backend.admit_with(RayAdmission(ray.get_actor(name)))
