"""The newcomer path as a user meets it: the console script run as a subprocess, piped (so
not a terminal) at 80 columns. Tables fold instead of cutting cells off, commands and
config print as copyable lines, misspelt keys get a "did you mean", one run id names the
run and its folder, and every nox session says what it does."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def patchgym(
    *args: str, cwd: Path | None = None, path: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "HF_HUB_OFFLINE": "1"}
    if path is not None:
        env["PATH"] = path
    env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "patchgym_trainer", *args],
        capture_output=True,  # piped: stdout is not a terminal
        text=True,
        env=env,
        cwd=cwd,
        timeout=600,
    )


def no_cut_cells(text: str) -> None:
    assert "…" not in text and "..." not in text.replace("...)", ""), text


def test_help_lists_debug() -> None:
    res = patchgym("--help")
    assert res.returncode == 0
    assert "--debug" in res.stdout and "traceback" in res.stdout
    assert "Gold patch must resolve every task, empty patch must not." in res.stdout
    cut = [x for x in res.stdout.splitlines() if x.endswith("...") and not x.startswith("Usage:")]
    assert not cut, cut  # no command's help cut off
    assert not [line for line in res.stdout.splitlines() if line != line.rstrip()]


@pytest.mark.parametrize(
    ("override", "wanted"),
    [
        ("env.max_step=3", "did you mean `env.max_steps`?"),
        ("sandbox.isolatoin=none", "did you mean `sandbox.isolation`?"),
        ("sandbox.bogus=1", "allowed under sandbox: "),
    ],
)
def test_misspelt_key_one_line_with_allowed_keys(override: str, wanted: str) -> None:
    res = patchgym("validate", override)
    assert res.returncode == 2  # as every config error
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, res.stderr
    assert wanted in lines[0]
    assert "allowed under" in lines[0] and "+" + override not in lines[0]  # no "use +key" hint
    assert "Traceback" not in res.stderr


def test_preflight_at_80_columns_folds_and_points_cpu_machines_at_trl() -> None:
    res = patchgym("preflight", "--no-images")
    no_cut_cells(res.stdout)
    assert "Qwen/Qwen2.5-0.5B-Instruct" in res.stdout  # the model's fix, whole on one line
    if "0 CUDA GPUs visible" in res.stdout:
        fixes = [line for line in res.stdout.splitlines() if line.startswith("  fix GPU:")]
        assert len(fixes) == 1 and "train.engine=trl preset=cpu_smoke" in fixes[0]


def test_dry_run_command_is_copyable(tmp_path: Path) -> None:
    res = patchgym("train", "preset=smoke", "--dry-run", f"run.output_dir={tmp_path}")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    start = lines.index(shlex.quote(sys.executable) + " \\")
    end = next(i for i in range(start, len(lines)) if not lines[i].endswith(" \\"))
    body = lines[start : end + 1]  # one argument per line, each ending in a continuation
    assert "  verl.trainer.main_ppo \\" in body and len(body) > 20
    path_line = next(line for line in body if "agent_loop_config_path=" in line)
    assert path_line.split("=", 1)[1].rstrip(" \\").endswith("agent_loop.yaml")  # never split
    written = next(tmp_path.glob("train-*/command.sh")).read_text()
    assert "\n".join(body) == written.rstrip("\n")


def test_config_lines_are_not_padded() -> None:
    res = patchgym("config")
    assert res.returncode == 0
    lines = res.stdout.splitlines()
    assert any(line.startswith("  max_steps: ") for line in lines)  # the value in effect
    assert not [line for line in lines if line != line.rstrip()]


async def test_sandboxes_list_keeps_ids_whole(tmp_path: Path) -> None:
    from patchgym_sandbox import SandboxSpec, create_backend
    from patchgym_sandbox import labels as L

    backend = create_backend({"type": "local"})
    run_id = f"ux-list-{uuid.uuid4().hex[:8]}"
    try:
        async with backend.sandbox(SandboxSpec(run_id=run_id)) as sb:
            res = patchgym("sandboxes", "list")
            assert res.returncode == 0, res.stderr
            assert any(sb.id in line for line in res.stdout.splitlines()), res.stdout
            no_cut_cells(res.stdout)
    finally:
        await backend.reap({L.RUN_ID: run_id}, expired=False)
        await backend.aclose()


@pytest.mark.parametrize(
    "command",
    [
        ["validate", "dataset.limit=1", "validate.patches=[gold]"],
        ["rollout", "dataset.limit=1", "rollout.policy=gold"],
    ],
    ids=["validate", "rollout"],
)
def test_one_run_id_names_the_output_folder(tmp_path: Path, command: list[str]) -> None:
    res = patchgym(*command, f"run.output_dir={tmp_path}")
    assert res.returncode == 0, res.stdout + res.stderr
    found = re.search(r"^run (\S+) → (.+)$", res.stdout, re.M)
    assert found, res.stdout
    run_id, folder = found.group(1), Path(found.group(2))
    assert folder.name == run_id and folder.parent == tmp_path
    assert [p.name for p in tmp_path.iterdir()] == [run_id] and run_id.startswith(command[0])
    assert (folder / "report.html").is_file()
    no_cut_cells(res.stdout)


def test_every_nox_session_is_described() -> None:
    pytest.importorskip("nox")
    res = subprocess.run(
        [sys.executable, "-m", "nox", "-l", "-f", str(ROOT / "noxfile.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    sessions = [line for line in res.stdout.splitlines() if line[:2] in ("* ", "- ")]
    assert len(sessions) > 10
    undescribed = [line for line in sessions if " -> " not in line]
    assert not undescribed, undescribed


@pytest.mark.parametrize(
    ("tools", "wanted"),
    [
        (
            ["git"],
            ["apt-get install bubblewrap", "`sandbox.isolation=none` on the patchgym command line"],
        ),
        ([], ["git is not installed", "apt-get install git"]),
    ],
)
def test_missing_system_package_is_one_line_naming_the_fix(
    tmp_path: Path, tools: list[str], wanted: list[str]
) -> None:
    """A machine without bubblewrap (or git): one line, exit 4, the package and the override."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} is not installed here")
        (bin_dir / tool).symlink_to(found)
    res = patchgym(
        "validate", "dataset.limit=1", "validate.patches=[gold]", "--out", str(tmp_path / "o"),
        path=str(bin_dir),
    )  # fmt: skip
    assert res.returncode == 4, res.stdout + res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    for needle in wanted:
        assert needle in lines[0]
