"""Backends provision sandboxes; configs describe and build backends.

Provisioning (create, list, remove, prepare images) lives on :class:`SandboxBackend`;
running commands lives on :class:`~patchgym_sandbox.sandbox.Sandbox`. Reaping is the same
rule everywhere (:func:`patchgym_sandbox.labels.should_reap`) over the backend's
``list_sandboxes`` / ``remove`` primitives.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from patchgym_sandbox import labels as L
from patchgym_sandbox.admission import Admission, LocalAdmission
from patchgym_sandbox.derived import DerivedImage, stale
from patchgym_sandbox.sandbox import Sandbox
from patchgym_sandbox.spec import SandboxSpec

if TYPE_CHECKING:
    from patchgym_sandbox.pool import SandboxPool


class CheckRow(BaseModel):
    """One preflight row a backend reports about its own config (credentials, reachability)."""

    name: str
    status: Literal["pass", "fail", "warn", "skip"]
    detail: str
    fix: str = ""


class BackendConfig(BaseModel):
    """Base of every backend config: ``type`` picks the backend; unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")

    type: str
    max_concurrency: int | None = Field(default=None, gt=0)
    """Most sandboxes alive at once that this backend should be asked for (preflight uses it)."""
    max_starting: int | None = Field(default=None, gt=0)
    """Admission control: most sandboxes provisioning at once (None: no cap). See
    :mod:`patchgym_sandbox.admission`."""
    creates_per_s: float | None = Field(default=None, gt=0)
    """Admission control: sandbox creations per second, a token bucket (None: no cap). A
    cloud backend's API quota (``create_rate()``) is paced per API call on top of this."""
    creates_burst: int | None = Field(default=None, gt=0)
    """Creations the bucket may let through at once (default: one second's worth)."""

    def create_rate(self) -> float | None:
        """Sandbox creations per second the backend allows (a cloud quota), None if unbounded."""
        return None

    def make_admission(self) -> Admission | None:
        """The admission control these settings ask for, None when they ask for none."""
        if self.max_starting is None and self.creates_per_s is None:
            return None
        return LocalAdmission(self.max_starting, self.creates_per_s, self.creates_burst)

    def node(self) -> dict[str, Any]:
        """This config as the plain mapping it validates from, secrets revealed: for handing
        it to another process (a worker's YAML file) that validates it again."""
        return {k: _plain(v) for k, v in self.model_dump(mode="python").items()}

    def checks(self) -> list[CheckRow]:
        """Cheap checks of this config before a run (no SDK import, no sandbox created).

        A backend that needs credentials overrides this; callers such as the trainer's
        preflight show the rows and never need to know backend names.
        """
        return [CheckRow(name="credentials", status="pass", detail=f"{self.type}: none needed")]

    def build(self) -> SandboxBackend:
        """Import the backend's SDK and construct it. Overridden by each backend."""
        raise NotImplementedError(f"{type(self).__name__}.build")


def _plain(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


class SandboxInfo(BaseModel):
    id: str
    labels: dict[str, str] = Field(default_factory=dict)
    state: str = "unknown"


class PrepareReport(BaseModel):
    present: list[str] = Field(default_factory=list)
    pulled: list[str] = Field(default_factory=list)
    missing: dict[str, str] = Field(default_factory=dict)
    """image -> why it could not be made available."""

    @property
    def ok(self) -> bool:
        return not self.missing


class SandboxBackend(ABC):
    name: ClassVar[str] = "abstract"

    def __init__(self, config: BackendConfig) -> None:
        self.config = config

    def sandbox(self, spec: SandboxSpec | None = None, **fields: Any) -> Sandbox:
        """A sandbox object, not yet started: it provisions on ``start()`` or first use."""
        base = spec if spec is not None else SandboxSpec()
        final = SandboxSpec.model_validate({**base.model_dump(), **fields})
        box = self._make_sandbox(final)
        box.origin = self
        return box

    @abstractmethod
    def _make_sandbox(self, spec: SandboxSpec) -> Sandbox: ...

    def provisioned_from(self, spec: SandboxSpec) -> str | None:
        """What this backend provisions ``spec`` from (what ``prepare`` must make available):
        the image by default; the local backend says its template folder."""
        return spec.image

    async def create_group(self, spec: SandboxSpec, n: int) -> list[Sandbox]:
        """``n`` started, identical sandboxes of ``spec`` for the n rollouts of one task.

        Generic: claimed from an open warm pool of the same sandbox shape (image,
        template, workdir, env, resources, ...; labels and ids aside) when there is one,
        else n concurrent starts, all or none. A backend with a cheaper way (a snapshot)
        overrides this.
        """
        from patchgym_sandbox.pool import claim_group, pool_key, start_group

        pools = self.warm_pools().get(pool_key(spec))
        if pools:
            return await claim_group(pools[-1], n)
        return await start_group(self, spec, n)

    def pool(self, spec: SandboxSpec, size: int, *, max_idle_s: float = 600.0) -> SandboxPool:
        """A warm pool of ``size`` started sandboxes of ``spec``: ``async with`` it, ``claim()``.

        While open, :meth:`create_group` for the same sandbox shape claims from it.
        """
        from patchgym_sandbox.pool import SandboxPool

        return SandboxPool(self, spec, size, max_idle_s=max_idle_s)

    @property
    def admission(self) -> Admission | None:
        """The gate every start of this backend's sandboxes passes (from the config's
        ``max_starting`` / ``creates_per_s``; see :mod:`patchgym_sandbox.admission`)."""
        if "_admission" not in self.__dict__:
            self.__dict__["_admission"] = self.config.make_admission()
        gate: Admission | None = self.__dict__["_admission"]
        return gate

    def admit_with(self, admission: Admission | None) -> None:
        """Share one admission among backends (every worker of a run: one cap for all)."""
        self.__dict__["_admission"] = admission

    def warm_pools(self) -> dict[str, list[SandboxPool]]:
        """Open pools by sandbox shape (kept on the backend object, for create_group)."""
        pools: dict[str, list[SandboxPool]] = self.__dict__.setdefault("_warm_pools", {})
        return pools

    async def prepare(self, images: Sequence[str]) -> PrepareReport:
        """Make images (or templates) available before a run. Default: nothing to do."""
        return PrepareReport(present=list(images))

    async def derive_image(self, image: str, script: str, *, repository: str) -> str | None:
        """An image of ``image`` after ``script`` ran in it once (``sh -c``, as root, no
        network), kept by the engine under ``repository`` and tagged by ``image``'s own id,
        so a later call (any process) reuses it and a changed ``image`` is derived anew.
        Returns its reference; None where this backend cannot keep derived images (default):
        the caller then sets ``SandboxSpec.start_script`` so each sandbox runs it at start.
        The image carries the labels of :mod:`patchgym_sandbox.derived`.
        """
        return None

    async def list_derived_images(self) -> list[DerivedImage]:
        """The images this backend's :meth:`derive_image` made (found by their labels)."""
        return []

    async def remove_derived_image(self, ref: str) -> bool:
        """Remove one derived image unless a container uses it (False: it stays)."""
        return False

    async def reap_derived_images(
        self, *, older_than_s: float | None = None, dry_run: bool = False
    ) -> dict[str, str]:
        """Remove the derived images no longer current or older than ``older_than_s``
        (:func:`patchgym_sandbox.derived.stale`); returns ``ref -> why`` of those removed
        (``dry_run``: of those that would be). An image a container uses stays."""
        picked = stale(await self.list_derived_images(), older_than_s=older_than_s)
        if dry_run:
            return picked
        return {ref: why for ref, why in picked.items() if await self.remove_derived_image(ref)}

    @abstractmethod
    async def list_sandboxes(self, labels: Mapping[str, str] | None = None) -> list[SandboxInfo]:
        """Sandboxes this backend manages (with our labels), optionally filtered."""

    @abstractmethod
    async def remove(self, sandbox_id: str) -> None:
        """Remove a sandbox and everything in it; a missing sandbox is not an error."""

    async def reap(
        self, labels: Mapping[str, str] | None = None, *, expired: bool = True
    ) -> list[str]:
        """Remove leftovers matching ``labels`` and/or whose lease expired; returns their ids."""
        removed: list[str] = []
        for info in await self.list_sandboxes():
            if L.should_reap(info.labels, labels, expired=expired):
                await self.remove(info.id)
                removed.append(info.id)
        return removed

    async def aclose(self) -> None:
        """Release clients and connections (not sandboxes: close those one by one)."""
