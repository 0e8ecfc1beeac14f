"""Failures the policy causes score 0; only failures outside its reach are infra.

A scripted policy plants code that runs when the hidden tests import the package at
grading (a fresh sandbox holding only its diff): it kills every process in the sandbox,
fills /tmp or memory, exhausts the pid limit, raises the namespace init's
``oom_score_adj``, or turns the hidden-tests directory into a dangling absolute link.
Each episode must end graded RESOLVED_NO with a reason and ``reward_valid`` (never
``infra_error``), on local and (where the engine runs) docker. Limits are small so that
the attacks are cheap.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import docker_config

from patchgym_envs import SWEEnv, bundled_task

SMALL = {"memory_mb": 384, "pids": 128, "disk_mb": 128}


def prepend(path: str, code: str) -> str:
    return f"{{ cat <<'PG_EOF'\n{code}\nPG_EOF\ncat '{path}'; }} > /tmp/h && cp /tmp/h '{path}'"


@dataclass(frozen=True)
class Attack:
    name: str
    task: str
    commands: tuple[str, ...]


KILL_ALL = "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass"
FILL_TMP = (
    "chunk = b'x' * (1 << 20)\n"
    "try:\n    with open('/tmp/pg-fill', 'wb') as f:\n        while True:\n"
    "            f.write(chunk)\nexcept OSError:\n    pass"
)
FILL_MEMORY = "hog = []\nwhile True:\n    hog.append(bytearray(1 << 24))"
FORK_BOMB = (
    "import os, time\nfor _ in range(100000):\n    try:\n        if os.fork() == 0:\n"
    "            time.sleep(600)\n            os._exit(0)\n    except OSError:\n        break"
)
OOM_INIT = (
    "for p in ('1', 'self'):\n    try:\n"
    "        open(f'/proc/{p}/oom_score_adj', 'w').write('1000')\n    except OSError:\n"
    "        pass\nhog = []\nwhile True:\n    hog.append(bytearray(1 << 24))"
)
ATTACKS = [
    Attack("kill_every_process", "csvlite", (prepend("csvlite/parser.py", KILL_ALL),)),
    Attack("fill_tmp", "csvlite", (prepend("csvlite/parser.py", FILL_TMP),)),
    Attack("fill_memory", "csvlite", (prepend("csvlite/parser.py", FILL_MEMORY),)),
    Attack("exhaust_pids", "csvlite", (prepend("csvlite/parser.py", FORK_BOMB),)),
    Attack("oom_score_of_init", "csvlite", (prepend("csvlite/parser.py", OOM_INIT),)),
    Attack("dangling_hidden_tests_dir", "wordwrap", ("ln -s /nonexistent/pg-gone r2e_tests",)),
    Attack("episode_kill_every_process", "csvlite", ("kill -9 -1",)),
    Attack("episode_fill_tmp", "csvlite", ("cat /dev/zero > /tmp/pg-fill",)),
    Attack(
        "episode_oom_init",
        "csvlite",
        (
            "echo 1000 > /proc/1/oom_score_adj; python3 -c 'b=[]\nwhile 1: b.append(bytearray(1<<24))'",
        ),
    ),
    Attack(
        "dangling_test_file_dir",
        "csvlite",
        ("git rm -rq tests && ln -s /nonexistent/pg-gone tests",),
    ),
]


@pytest.fixture(params=["local", "local-gvisor", "docker"])
def sandbox_config(request: pytest.FixtureRequest, local_config: dict[str, Any]) -> dict[str, Any]:
    if request.param == "local":
        return local_config
    if request.param == "local-gvisor":
        if shutil.which("runsc") is None:
            pytest.skip("isolation: gvisor needs runsc")
        return {**local_config, "isolation": "gvisor"}
    # docker does not enforce disk_mb on an ext4 data root (sandbox-docker README): unbounded,
    # the fill attacks wrote until this host's disk was full (~48 GB, ~75 s each), and every
    # other writer on the host failed meanwhile (a docker build beside them: ENOSPC). /tmp,
    # the attacks' target, is a tmpfs of the disk limit here, as a deployment would bound it.
    tmp = {"/tmp": f"rw,exec,nosuid,nodev,size={SMALL['disk_mb']}m"}
    return {**docker_config("csvlite", "wordwrap"), "extra_host_config": {"tmpfs": tmp}}


async def episode(sandbox: dict[str, Any], attack: Attack) -> tuple[float, dict[str, Any]]:
    env = SWEEnv(
        bundled_task(attack.task),
        sandbox=sandbox,
        max_steps=len(attack.commands) + 2,
        resources=SMALL,
        step_timeout_s=120,
    )
    try:
        await env.areset()
        for cmd in attack.commands:
            obs, reward, done, info = await env.astep(
                {"name": "execute_bash", "arguments": {"cmd": cmd}}
            )
            if done:  # the attack ended the episode's own sandbox
                assert info["done_reason"] == "sandbox_died", obs
                return reward, info
        _, reward, done, info = await env.astep({"name": "finish", "arguments": {}})
        assert done
        return reward, info
    finally:
        await env.aclose()


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
async def test_policy_caused_failure_scores_zero(
    sandbox_config: dict[str, Any], attack: Attack
) -> None:
    reward, info = await episode(sandbox_config, attack)
    assert info["reward_valid"], f"{attack.name} masked as infra: {info.get('infra_error')}"
    verdict = info["verdict"]
    assert reward == 0.0 and verdict["status"] == "RESOLVED_NO", verdict
    assert verdict["infra_error"] is None
