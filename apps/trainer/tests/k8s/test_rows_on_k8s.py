"""``build-local --for k8s`` then ``validate sandbox=k8s`` on a real row and a real cluster.

The same semver row as ``test_build_local.py``, turned into an image with no network and
made visible to the cluster's node runtime (``--node-runtime``; the project's test cluster
is dockershim, so the image built in the node's Docker engine is already there). The
session ``tests-trainer-k8s`` runs this once the cluster is up (phase 2 of ``.ci/run``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from sdist_rows import sdist_repo

from patchgym_k8s.testing import cluster_problem
from patchgym_sandbox.testing.engines import engine_missing
from patchgym_trainer.cli import main

HERE = Path(__file__).parents[1] / "localbuild"
ROW = json.loads((HERE / "semver.jsonl").read_text())
KUBECONFIG = os.environ.get("KUBECONFIG") or "/tmp/k8s/kubeconfig"
NODE_RUNTIME = os.environ.get("PATCHGYM_K8S_NODE_RUNTIME", "docker")
HOST_NETWORK = os.environ.get("PATCHGYM_K8S_HOST_NETWORK", "1") != "0"
"""As in sandbox-k8s's tests: the loopback-only test cluster gives pods no IP."""
pytestmark = pytest.mark.filterwarnings("ignore:Unverified HTTPS request")  # the test cluster


def run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as code:
        main(argv)
    return int(code.value.code or 0)


def test_k8s_images_validate_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from patchgym_envs.bundled.docker import base_image_problem

    problem = cluster_problem(KUBECONFIG) or base_image_problem()
    if problem is not None:
        engine_missing(problem)
    monkeypatch.setenv("KUBECONFIG", KUBECONFIG)
    mirror = sdist_repo(
        "semver==3.0.1",
        tmp_path / "mirror",
        date="2023-06-14T11:20:42+00:00",
        message="semver 3.0.1 (sdist)",
        base_commit=ROW["base_commit"],
    )
    out = tmp_path / "k8s"
    code = run(
        [
            "datasets", "build-local", "dataset=file", f"dataset.path={HERE / 'semver.jsonl'}",
            "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--for", "k8s",
            "--node-runtime", NODE_RUNTIME, "--mirror", f"{ROW['repo']}={mirror}",
            "--specs", str(HERE / "specs.yaml"),
        ]
    )  # fmt: skip
    assert code == 0, (out / "report.md").read_text()
    (task,) = [json.loads(x) for x in (out / "tasks.jsonl").read_text().splitlines()]
    env_tag = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{index .Config.Labels \"patchgym.env-image\"}}",
         task["image"]], capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    try:
        code = run(
            ["validate", "sandbox=k8s", f"+sandbox.host_network={str(HOST_NETWORK).lower()}",
             "dataset=file", f"dataset.path={out / 'tasks.jsonl'}", "--out", str(tmp_path / "v")]
        )  # fmt: skip
    finally:  # this run's images only (their tags hold this run's paths)
        subprocess.run(["docker", "rmi", task["image"], env_tag], capture_output=True, check=False)
    rows = [json.loads(x) for x in (tmp_path / "v" / "results.jsonl").read_text().splitlines()]
    assert code == 0, rows
    assert {r["patch"]: r["resolved"] for r in rows} == {"gold": True, "empty": False}
