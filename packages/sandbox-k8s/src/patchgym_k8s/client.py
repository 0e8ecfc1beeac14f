"""Kubernetes API access: one configuration, raw JSON calls, per-thread clients for streams.

Responses are read as JSON (``_preload_content=False``) instead of generated model
objects, which keeps this backend independent of the client version's model layer.
``kubernetes.stream.stream`` temporarily patches its ``ApiClient`` while it connects, so
concurrent exec streams on one shared client would race; every thread gets its own.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from patchgym_k8s.config import K8sConfig
from patchgym_k8s.errors import from_api_exception
from patchgym_sandbox.errors import BackendUnavailable, ConfigError

DEFAULT_KUBECONFIG = Path.home() / ".kube" / "config"


def load_configuration(cfg: K8sConfig) -> k8s_client.Configuration:
    """A client Configuration from the kubeconfig (or the in-cluster service account)."""
    conf = k8s_client.Configuration()
    path = cfg.kubeconfig or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or None
    if cfg.in_cluster:
        try:
            k8s_config.load_incluster_config(client_configuration=conf)  # type: ignore[no-untyped-call]  # the kubernetes client's config loaders are unannotated
        except k8s_config.ConfigException as exc:
            raise BackendUnavailable(
                f"in_cluster=true but no in-cluster service account: {exc}"
            ) from exc
    else:
        if path is None and not DEFAULT_KUBECONFIG.exists():
            try:
                k8s_config.load_incluster_config(client_configuration=conf)  # type: ignore[no-untyped-call]  # the kubernetes client's config loaders are unannotated
            except k8s_config.ConfigException as exc:
                raise BackendUnavailable(
                    "no kubeconfig: set `kubeconfig`, $KUBECONFIG, create ~/.kube/config, "
                    f"or run inside a cluster ({exc})"
                ) from exc
        else:
            target = path or str(DEFAULT_KUBECONFIG)
            if not Path(target).exists():
                raise ConfigError(
                    f"kubeconfig {target!r} does not exist; fix `kubeconfig` or $KUBECONFIG"
                )
            try:
                k8s_config.load_kube_config(  # type: ignore[no-untyped-call]  # the kubernetes client's config loaders are unannotated
                    config_file=target, context=cfg.context, client_configuration=conf
                )
            except k8s_config.ConfigException as exc:
                raise ConfigError(
                    f"cannot load kubeconfig {target!r} (context {cfg.context!r}): {exc}"
                ) from exc
    conf.connection_pool_maxsize = max(cfg.max_threads, 16)
    return conf


class Api:
    """The few core/v1 and apps/v1 calls the backend makes, as plain JSON."""

    def __init__(self, cfg: K8sConfig) -> None:
        self.cfg = cfg
        self.conf = load_configuration(cfg)
        self.api_client = k8s_client.ApiClient(self.conf)
        self.core = k8s_client.CoreV1Api(self.api_client)
        self.apps = k8s_client.AppsV1Api(self.api_client)
        self._local = threading.local()

    def stream_core(self) -> k8s_client.CoreV1Api:
        """A CoreV1Api private to this thread, for ``kubernetes.stream.stream``."""
        core = getattr(self._local, "core", None)
        if core is None:
            core = k8s_client.CoreV1Api(k8s_client.ApiClient(self.conf))
            self._local.core = core
        return core

    def close(self) -> None:
        self.api_client.close()  # type: ignore[no-untyped-call]  # kubernetes' ApiClient.close is unannotated

    # -- pods ------------------------------------------------------------------------
    def create_pod(self, body: dict[str, Any]) -> dict[str, Any]:
        return _json(
            self.core.create_namespaced_pod(
                self.cfg.namespace, cast(Any, body), _preload_content=False
            )
        )

    def read_pod(self, name: str) -> dict[str, Any] | None:
        """The pod, or None when it does not exist."""
        try:
            return _json(
                self.core.read_namespaced_pod(name, self.cfg.namespace, _preload_content=False)
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise from_api_exception(exc, f"read pod {name}") from exc

    def list_pods(self, label_selector: str) -> list[dict[str, Any]]:
        try:
            resp = self.core.list_namespaced_pod(
                self.cfg.namespace, label_selector=label_selector, _preload_content=False
            )
        except ApiException as exc:
            raise from_api_exception(exc, f"list pods in {self.cfg.namespace}") from exc
        return list(_json(resp).get("items") or [])

    def patch_pod(self, name: str, patch: dict[str, Any]) -> None:
        try:
            self.core.patch_namespaced_pod(name, self.cfg.namespace, patch, _preload_content=False)
        except ApiException as exc:
            raise from_api_exception(exc, f"patch pod {name}") from exc

    def delete_pod(self, name: str, grace_s: int) -> dict[str, Any] | None:
        """Start deleting; returns the pod (still terminating) or None when already gone."""
        try:
            resp = self.core.delete_namespaced_pod(
                name, self.cfg.namespace, grace_period_seconds=grace_s, _preload_content=False
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise from_api_exception(exc, f"delete pod {name}") from exc
        data = _json(resp)
        return data if data.get("kind") == "Pod" else None

    def watch_pod(
        self, name: str, resource_version: str | None, timeout_s: float
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Events (type, object) for one pod until ``timeout_s`` passes on the server."""
        kwargs = _watch_kwargs(name, resource_version, timeout_s)
        if resource_version:
            kwargs["allow_watch_bookmarks"] = False
        try:
            resp = self.core.list_namespaced_pod(self.cfg.namespace, **kwargs)
        except ApiException as exc:
            raise from_api_exception(exc, f"watch pod {name}") from exc
        yield from _events(resp)

    # -- daemon sets (pre-pull) -------------------------------------------------------
    def create_daemon_set(self, body: dict[str, Any]) -> None:
        try:
            self.apps.create_namespaced_daemon_set(
                self.cfg.namespace, cast(Any, body), _preload_content=False
            )
        except ApiException as exc:
            raise from_api_exception(exc, "create the pre-pull DaemonSet") from exc

    def read_daemon_set(self, name: str) -> dict[str, Any]:
        try:
            return _json(
                self.apps.read_namespaced_daemon_set(
                    name, self.cfg.namespace, _preload_content=False
                )
            )
        except ApiException as exc:
            raise from_api_exception(exc, f"read DaemonSet {name}") from exc

    def read_daemon_set_or_none(self, name: str) -> dict[str, Any] | None:
        try:
            return _json(
                self.apps.read_namespaced_daemon_set(
                    name, self.cfg.namespace, _preload_content=False
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise from_api_exception(exc, f"read DaemonSet {name}") from exc

    def list_daemon_sets(self, label_selector: str) -> list[dict[str, Any]]:
        try:
            resp = self.apps.list_namespaced_daemon_set(
                self.cfg.namespace, label_selector=label_selector, _preload_content=False
            )
        except ApiException as exc:
            raise from_api_exception(exc, f"list DaemonSets in {self.cfg.namespace}") from exc
        return list(_json(resp).get("items") or [])

    def delete_daemon_set(self, name: str) -> None:
        try:
            self.apps.delete_namespaced_daemon_set(
                name, self.cfg.namespace, propagation_policy="Foreground", _preload_content=False
            )
        except ApiException as exc:
            if exc.status != 404:
                raise from_api_exception(exc, f"delete DaemonSet {name}") from exc

    def watch_daemon_set(
        self, name: str, resource_version: str | None, timeout_s: float
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Events (type, object) for one DaemonSet until ``timeout_s`` passes on the server."""
        kwargs = _watch_kwargs(name, resource_version, timeout_s)
        try:
            resp = self.apps.list_namespaced_daemon_set(self.cfg.namespace, **kwargs)
        except ApiException as exc:
            raise from_api_exception(exc, f"watch DaemonSet {name}") from exc
        yield from _events(resp)


def _watch_kwargs(name: str, resource_version: str | None, timeout_s: float) -> dict[str, Any]:
    """A list call's arguments for watching the one object ``name`` until ``timeout_s``
    passes on the server (from ``resource_version`` when given)."""
    kwargs: dict[str, Any] = {
        "field_selector": f"metadata.name={name}",
        "watch": True,
        "timeout_seconds": max(1, int(timeout_s + 0.999)),
        "_preload_content": False,
        "_request_timeout": (10, timeout_s + 15),
    }
    if resource_version:
        kwargs["resource_version"] = resource_version
    return kwargs


def _json(resp: Any) -> dict[str, Any]:
    data = resp.data if hasattr(resp, "data") else resp
    if isinstance(data, bytes | str):
        loaded: dict[str, Any] = json.loads(data)
        return loaded
    return dict(data)


def _events(resp: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    buf = b""
    try:
        for chunk in resp.stream(65536):
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    ev = json.loads(line)
                    yield str(ev.get("type")), dict(ev.get("object") or {})
    finally:
        resp.release_conn()
