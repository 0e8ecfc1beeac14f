"""``build-local --for k8s``: the commands that load a row image into a node's runtime.

Not run against a cluster here: the project's single-node cluster runs pods on the local
Docker engine (nothing to load), and a containerd node is not started by the test setup.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from patchgym_envs.localbuild.cluster import load_image, load_pipeline
from patchgym_envs.localbuild.errors import BuildFailed


def test_containerd_gets_docker_save_piped_into_ctr_import_in_the_k8s_namespace() -> None:
    assert load_pipeline("patchgym-swe:row-1", "containerd") == (
        ["docker", "save", "patchgym-swe:row-1"],
        ["ctr", "-n", "k8s.io", "images", "import", "-"],
    )
    pipeline = load_pipeline("img:1", "containerd", address="/run/k3s/containerd.sock")
    assert pipeline is not None
    _, imported = pipeline
    assert imported[:4] == ["ctr", "--address", "/run/k3s/containerd.sock", "-n"]


def test_a_kubelet_on_the_docker_engine_needs_no_load() -> None:
    assert load_pipeline("img:1", "docker") is None
    load_image("no-such-image:0", "docker")  # nothing runs, nothing fails


def test_a_missing_tool_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # neither docker nor ctr
    with pytest.raises(BuildFailed, match="needs 'docker' on PATH"):
        load_image("img:1", "containerd")
