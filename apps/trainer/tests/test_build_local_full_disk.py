"""A full disk under ``patchgym datasets build-local`` is an expected error (exit 4): one
line naming the file it could not write and what ``--out`` kept, every kept file whole and
an earlier build's files untouched. The disk is a real tmpfs, mounted for the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_build_local import HERE, ROW, semver_repo
from tiny_disks import fill, one_line, tmpfs


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "disk", "8m") as mnt:  # room for the semver template and reports
        yield mnt


def build(out: Path, mirror: Path | None, cache: Path) -> subprocess.CompletedProcess[str]:
    mirrors = ["--mirror", f"{ROW['repo']}={mirror}"] if mirror else []
    return subprocess.run(
        [sys.executable, "-m", "patchgym_trainer", "datasets", "build-local", "dataset=file",
         f"dataset.path={HERE / 'semver.jsonl'}", "--out", str(out), "--cache-dir", str(cache),
         "--specs", str(HERE / "specs.yaml"), "--no-probe", *mirrors],
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}, timeout=900,
    )  # fmt: skip


def test_no_room_at_all_says_nothing_was_kept(disk: Path, tmp_path: Path) -> None:
    out = disk / "run"
    fill(disk, leave_pages=0)
    res = build(out, None, tmp_path / "cache")
    assert res.returncode == 4, res.stdout + res.stderr
    line = one_line(res.stderr)
    assert line.startswith("disk full:") and f"writing {out}" in line
    assert f"kept in {out}: nothing (each file whole)" in line


def test_a_full_disk_on_rebuild_keeps_the_earlier_build_whole(disk: Path, tmp_path: Path) -> None:
    out, cache = disk / "run", tmp_path / "cache"
    mirror = semver_repo(tmp_path / "semver")
    first = build(out, mirror, cache)
    assert first.returncode == 0, first.stdout + first.stderr
    names = ["report.json", "report.md", "tasks.jsonl"]
    before = {n: (out / n).read_text() for n in names}
    fill(disk, leave_pages=0)
    res = build(out, mirror, cache)
    assert res.returncode == 4, res.stdout + res.stderr
    line = one_line(res.stderr)
    assert line.startswith("disk full:") and f"writing {out / 'tasks.jsonl'}" in line
    assert f"kept in {out}: {', '.join(names)} (each file whole)" in line
    assert {n: (out / n).read_text() for n in names} == before
    assert json.loads(before["tasks.jsonl"])["id"] == ROW["instance_id"]
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
