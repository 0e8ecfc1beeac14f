"""Row fields are data: ``template`` and ``metadata.local_env.path`` resolve only beneath the
data roots (the cache, configured folders, folders ``build-local`` marked); anything else is
a RowPathError naming the row and the field, raised before any sandbox exists."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from patchgym_envs import SWEEnv, bundled_task
from patchgym_envs.bundled.template import cache_home
from patchgym_envs.rowpaths import ROOTS_VAR, RowPathError, mark_root
from patchgym_envs.sandboxes import spec_for
from patchgym_sandbox import create_backend

HOSTILE = ["/run", "/proc", "/root", "/", "/etc", "../..", "templates/../../..", "", "/nonexistent"]


@pytest.fixture
def backend(local_config: dict[str, Any]) -> Any:
    return create_backend(local_config)


def task_with(**update: Any) -> Any:
    return bundled_task("wordwrap").model_copy(update=update)


@pytest.mark.parametrize("value", HOSTILE)
def test_template_outside_the_roots_is_a_row_error(backend: Any, value: str) -> None:
    with pytest.raises(RowPathError) as info:
        spec_for(task_with(template=value), backend)
    assert info.value.field == "template" and info.value.task_id == "patchgym__wordwrap-1"
    assert "template" in str(info.value) and "patchgym__wordwrap-1" in str(info.value)


@pytest.mark.parametrize("value", [v for v in HOSTILE if v])  # "": no local env at all
def test_local_env_outside_the_roots_is_a_row_error(backend: Any, value: str) -> None:
    task = task_with(metadata={"local_env": {"path": value, "base_prefix": "/"}})
    with pytest.raises(RowPathError) as info:
        spec_for(task, backend)
    assert info.value.field == "metadata.local_env.path"


def test_links_out_of_a_root_are_followed_then_refused(backend: Any, tmp_path: Path) -> None:
    inside = cache_home() / f"pg-links-{os.getpid()}"
    inside.mkdir(parents=True, exist_ok=True)
    (inside / "to-root").unlink(missing_ok=True)
    (inside / "to-root").symlink_to("/root")
    (inside / "up").unlink(missing_ok=True)
    (inside / "up").symlink_to("../../../../../../../proc")
    for name in ("to-root", "up"):
        with pytest.raises(RowPathError, match="outside the data roots"):
            spec_for(task_with(template=str(inside / name)), backend)
        with pytest.raises(RowPathError):
            env = {"local_env": {"path": str(inside / name)}}
            spec_for(task_with(metadata=env), backend)
    with pytest.raises(RowPathError):  # the root itself is not a template
        spec_for(task_with(template=str(cache_home())), backend)


def test_marked_and_configured_roots_are_accepted(
    backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = bundled_task("wordwrap")
    template = spec_for(repo, backend).template
    assert template is not None
    built = tmp_path / "built"
    (built / "templates").mkdir(parents=True)
    copy = built / "templates" / "t1"
    subprocess.run(["cp", "-a", template, str(copy)], check=True)
    with pytest.raises(RowPathError):
        spec_for(task_with(template=str(copy)), backend)
    assert spec_for(task_with(template=str(copy)), backend, data_roots=[str(built)]).template
    monkeypatch.setenv(ROOTS_VAR, str(built))
    assert spec_for(task_with(template=str(copy)), backend).template == str(copy.resolve())
    monkeypatch.delenv(ROOTS_VAR)
    mark_root(built)
    assert spec_for(task_with(template=str(copy)), backend).template == str(copy.resolve())


def test_local_env_base_prefix_comes_from_the_venv_not_the_row(
    backend: Any, tmp_path: Path
) -> None:
    mark_root(tmp_path / "cache")
    venv = tmp_path / "cache" / "envs" / "k1"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    row = {"local_env": {"path": str(venv), "base_prefix": "/run"}}
    spec = spec_for(task_with(metadata=row), backend)
    assert spec.mounts[0] == str(venv.resolve()) and "/run" not in spec.mounts
    assert (
        spec.mounts[1] == str(Path(sys.base_prefix).resolve())
        or Path(spec.mounts[1]).joinpath("bin").is_dir()
    )
    (tmp_path / "cache" / "envs" / "not-venv").mkdir()
    with pytest.raises(RowPathError, match="not a virtualenv"):
        row = {"local_env": {"path": str(tmp_path / "cache" / "envs" / "not-venv")}}
        spec_for(task_with(metadata=row), backend)


@pytest.mark.parametrize("field", ["template", "local_env"])
def test_env_refuses_the_row_before_any_sandbox(local_config: dict[str, Any], field: str) -> None:
    update: dict[str, Any] = (
        {"template": "/root"}
        if field == "template"
        else {"metadata": {"local_env": {"path": "/run"}}}
    )
    env = SWEEnv(task_with(**update), sandbox=local_config)
    env.reset()
    with pytest.raises(RowPathError):
        env.step({"name": "execute_bash", "arguments": {"cmd": "ls /"}})
    env.close()
    assert not list(Path(local_config["state_dir"]).glob("pg-*"))
