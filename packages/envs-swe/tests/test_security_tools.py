"""Env-level attacks: the policy drives ``SWEEnv.step`` with the r2egym and debug-gym tools
against links it planted, on the local backend with default settings. Every attempt must
end as an ordinary observation that carries no secret, and nothing outside changes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from patchgym_envs import SWEEnv, bundled_task

SHADOW = (
    [ln for ln in Path("/etc/shadow").read_text().splitlines() if ln.strip()]
    if Path("/etc/shadow").exists()
    else []
)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


@pytest.fixture
def secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    driver = "pg-driver-key-" + uuid.uuid4().hex
    monkeypatch.setenv("PATCHGYM_TEST_API_KEY", driver)  # a credential the driver holds
    host_file = tmp_path / "host-secret.txt"
    host_file.write_text("pg-host-file-" + uuid.uuid4().hex + "\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    return {"driver": driver, "file": host_file, "outside": outside}


@pytest.fixture
def env_for(local_config: dict[str, Any]) -> Iterator[Any]:
    envs: list[SWEEnv] = []

    def make(scaffold: str) -> SWEEnv:
        env = SWEEnv(bundled_task("wordwrap"), sandbox=local_config, scaffold=scaffold)
        env.reset()
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


def plant(env: SWEEnv, shell_tool: str, s: dict[str, Any]) -> None:
    cmd = (
        f"ln -s /proc/self/environ env-link; ln -s /etc/shadow shadow-link; "
        f"ln -s {s['file']} host-link; ln -s {s['outside']} out-link; ln -s / root-link"
    )
    arg = "cmd" if shell_tool == "execute_bash" else "command"
    obs, _, done, _ = env.step(call(shell_tool, **{arg: cmd}))
    assert not done, obs


def assert_clean(obs: str, s: dict[str, Any]) -> None:
    assert s["driver"] not in obs, "the driver's environment reached the policy"
    assert s["file"].read_text().strip() not in obs, "a file of this machine reached the policy"
    for line in SHADOW:
        assert line not in obs, "this machine's /etc/shadow reached the policy"


def assert_outside_untouched(s: dict[str, Any], before: str) -> None:
    assert s["file"].read_text() == before, "a file of this machine was changed"
    assert list(s["outside"].iterdir()) == [], "a file was created on this machine"


def test_r2egym_file_editor_on_planted_links(env_for: Any, secrets: dict[str, Any]) -> None:
    env = env_for("r2egym")
    plant(env, "execute_bash", secrets)
    before = secrets["file"].read_text()
    actions = [
        call("file_editor", command="view", path="/testbed/env-link"),
        call("file_editor", command="view", path="/testbed/shadow-link"),
        call("file_editor", command="view", path="/testbed/host-link"),
        call("file_editor", command="view", path=f"/testbed/root-link{secrets['file']}"),
        call("file_editor", command="view", path="/proc/self/environ"),
        call("file_editor", command="view", path="/etc/shadow"),
        call("file_editor", command="create", path="/testbed/out-link/new.py", file_text="x\n"),
        call("file_editor", command="create", path=f"{secrets['outside']}/abs.py", file_text="x"),
        call("file_editor", command="str_replace", path="/testbed/host-link",
             old_str="pg-host-file", new_str="pwned"),
        call("file_editor", command="insert", path="/testbed/host-link", insert_line=0,
             new_str="pwned"),
        call("execute_bash", cmd="cat /proc/$PPID/environ /proc/1/environ; cat /etc/shadow"),
        call("search", search_term="pg-", path="/testbed/root-link/tmp"),
    ]  # fmt: skip
    for action in actions:
        obs, _, done, _ = env.step(action)
        assert not done
        assert_clean(obs, secrets)
    assert_outside_untouched(secrets, before)


def test_debug_gym_tools_on_planted_links(env_for: Any, secrets: dict[str, Any]) -> None:
    env = env_for("debug-gym")
    plant(env, "bash", secrets)
    before = secrets["file"].read_text()
    actions = [
        call("view", path="env-link"),
        call("view", path="shadow-link"),
        call("view", path="host-link"),
        call("view", path=f"root-link{secrets['file']}"),
        call("edit", path="host-link", start=1, end=1, new_code="pwned"),
        call("edit", path="out-link/new.py", start=1, end=1, new_code="pwned"),
        call("listdir", path="/testbed/out-link", depth=1),
        call("grep", pattern="pg-host-file"),
        call("bash", command="cat /proc/$PPID/environ; cat /etc/shadow; ls -a /root"),
        call("eval"),
    ]
    for action in actions:
        obs, _, done, _ = env.step(action)
        assert not done
        assert_clean(obs, secrets)
    assert_outside_untouched(secrets, before)
