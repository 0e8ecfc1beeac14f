"""An image pulled as-is on k8s: no registry to keep a derivation in, so each pod reduces
its ``.git`` to the base commit before it is handed out (``SandboxSpec.start_script``),
and the policy's sandbox holds no later commit, tag, remote or object.

The image (named like SWE-bench's, unique to this test, removed at its end) is built in
the node's Docker engine, which the test cluster's dockershim runs pods from. The session
``tests-trainer-k8s`` runs this once the cluster is up (phase 2 of ``.ci/run``).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from typing import Any

import pytest

from patchgym_envs import EnvConfig, bundled_task
from patchgym_envs.testing import assert_no_future, build_future_image, git_checks, holds_the_future
from patchgym_k8s.testing import cluster_problem
from patchgym_sandbox import create_backend
from patchgym_sandbox.testing.engines import engine_missing

KUBECONFIG = os.environ.get("KUBECONFIG") or "/tmp/k8s/kubeconfig"
HOST_NETWORK = os.environ.get("PATCHGYM_K8S_HOST_NETWORK", "1") != "0"
"""As in sandbox-k8s's tests: the loopback-only test cluster gives pods no IP."""
pytestmark = pytest.mark.filterwarnings("ignore:Unverified HTTPS request")  # the test cluster
SESSION = uuid.uuid4().hex[:10]
IMAGE = f"local/sweb.eval.x86_64.patchgym-future-{SESSION}:latest"


async def test_each_pod_of_an_image_pulled_as_is_holds_only_the_base() -> None:
    from patchgym_envs.bundled.docker import base_image_problem

    problem = cluster_problem(KUBECONFIG) or base_image_problem()
    if problem is not None:
        engine_missing(problem)
    base = build_future_image(IMAGE)
    sandbox: dict[str, Any] = {
        "type": "k8s",
        "kubeconfig": KUBECONFIG,
        "host_network": HOST_NETWORK,
        "image_pull_policy": "Never",
        "labels": {"patchgym.test-session": SESSION},
        "create_timeout_s": 120,
    }
    backend = create_backend(sandbox)
    env = EnvConfig(sandbox=sandbox)
    task = bundled_task("csvlite").model_copy(update={"image": IMAGE, "base_commit": base})
    try:
        async with backend.sandbox(env.sandbox_spec(task, backend)) as plain:
            assert holds_the_future(await git_checks(plain))  # the image as pulled
        keys = env.images_to_clean([task], backend)
        assert list((await env.prepare_images(keys, backend)).values()) == [None]
        spec = await env.aspec(task, backend)
        assert spec.image == IMAGE and spec.start_script is not None
        async with backend.sandbox(spec) as box:
            assert_no_future(await git_checks(box), base)
    finally:
        await backend.aclose()
        subprocess.run(["docker", "image", "rm", IMAGE], capture_output=True, check=False)
