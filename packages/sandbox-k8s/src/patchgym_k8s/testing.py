"""Is a Kubernetes cluster reachable? One answer for every test that needs one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client, config


def cluster_problem(kubeconfig: str) -> str | None:
    """Why no Kubernetes cluster with a Ready node answers at ``kubeconfig``; None if one does
    (what the k8s tests, and the trainer's tests of rows on k8s, skip or fail on)."""
    if not Path(kubeconfig).exists():
        return (
            f"no kubeconfig at {kubeconfig}; start a cluster with ci/engines/k8s-up.sh "
            "or set KUBECONFIG"
        )
    try:
        conf = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]  # unannotated in the client
            config_file=kubeconfig, client_configuration=conf
        )
        with client.ApiClient(conf) as api:
            client.VersionApi(api).get_code(_request_timeout=5)
            nodes: Any = client.CoreV1Api(api).list_node(_request_timeout=5, _preload_content=False)
            if b'"Ready","status":"True"' not in nodes.data.replace(b" ", b""):
                return "the cluster has no Ready node"
    except Exception as exc:
        return f"no Kubernetes API server reachable with {kubeconfig} ({exc})"
    return None
