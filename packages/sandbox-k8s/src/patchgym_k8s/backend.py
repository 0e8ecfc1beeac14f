"""``K8sBackend``: pods in one namespace, blocking client calls on a bounded thread pool."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from patchgym_k8s import metadata
from patchgym_k8s.client import Api
from patchgym_k8s.config import K8sConfig
from patchgym_k8s.deletion import delete_pod
from patchgym_k8s.sandbox import K8sSandbox
from patchgym_sandbox import labels as L
from patchgym_sandbox.backend import PrepareReport, SandboxBackend, SandboxInfo
from patchgym_sandbox.offload import run_blocking
from patchgym_sandbox.spec import SandboxSpec

T = TypeVar("T")


class K8sBackend(SandboxBackend):
    name = "k8s"
    config: K8sConfig

    def __init__(self, config: K8sConfig) -> None:
        super().__init__(config)
        self._api: Api | None = None
        self._executor: ThreadPoolExecutor | None = None

    @property
    def api(self) -> Api:
        if self._api is None:
            self._api = Api(self.config)
        return self._api

    def executor(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.config.max_threads, "patchgym-k8s")
        return self._executor

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking client call on the backend's bounded pool."""
        return await run_blocking(fn, *args, executor=self.executor(), **kwargs)

    def _make_sandbox(self, spec: SandboxSpec) -> K8sSandbox:
        return K8sSandbox(self, spec)

    async def list_sandboxes(self, labels: Mapping[str, str] | None = None) -> list[SandboxInfo]:
        selector = metadata.selector({L.MANAGED: "true", **(labels or {})})
        pods = await self.call(self.api.list_pods, selector)
        out: list[SandboxInfo] = []
        for pod in pods:
            meta = pod.get("metadata") or {}
            exact = metadata.labels_of(pod)
            if labels and not L.matches(exact, labels):
                continue  # a digest collision or a foreign pod: the exact labels decide
            state = (
                "terminating"
                if meta.get("deletionTimestamp")
                else str((pod.get("status") or {}).get("phase", "unknown")).lower()
            )
            out.append(SandboxInfo(id=str(meta.get("name")), labels=exact, state=state))
        return out

    async def remove(self, sandbox_id: str) -> None:
        cfg = self.config
        await self.call(
            delete_pod,
            self.api,
            sandbox_id,
            grace_s=cfg.termination_grace_s,
            timeout_s=cfg.delete_timeout_s,
        )

    async def reap(
        self, labels: Mapping[str, str] | None = None, *, expired: bool = True
    ) -> list[str]:
        """Remove our pods matching ``labels`` or whose lease expired, all deletions in
        parallel; and so the pre-pull DaemonSets a crashed driver left (leased as pods are)."""
        from patchgym_k8s.prepull import GONE_TIMEOUT_S, leftover_daemon_sets, remove_daemon_set

        doomed = [
            info.id
            for info in await self.list_sandboxes()
            if L.should_reap(info.labels, labels, expired=expired)
        ]
        daemon_sets = await self.call(leftover_daemon_sets, self.api, labels, expired=expired)
        await asyncio.gather(
            *(self.remove(i) for i in doomed),
            *(self.call(remove_daemon_set, self.api, d, GONE_TIMEOUT_S) for d in daemon_sets),
        )
        return doomed

    async def prepare(self, images: Sequence[str]) -> PrepareReport:
        """With ``prepull``: pull ``images`` on every node via a DaemonSet. Otherwise nothing:
        the node pulls on first use (an unpullable image fails that create with ImageNotFound)."""
        if not self.config.prepull or not images:
            return PrepareReport()
        from patchgym_k8s.prepull import prepull

        return await self.call(prepull, self.api, list(images))

    async def aclose(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        if self._api is not None:
            api, self._api = self._api, None
            await run_blocking(api.close)
