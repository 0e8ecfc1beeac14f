"""A full disk is an expected error: ``patchgym validate`` writing its report on a real full
filesystem (a tiny tmpfs, mounted for the test) exits 4 with one line naming the file it
could not write and what the output folder kept, and every kept file is whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tiny_disks import fill, one_line, tmpfs


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "disk", "256k") as mnt:
        yield mnt


def validate(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchgym_trainer", "validate", "dataset.limit=1",
         "validate.patches=[gold]", "--out", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80"},
        timeout=600,
    )  # fmt: skip


def test_room_for_results_only_keeps_them_whole(tiny_disk: Path) -> None:
    out = tiny_disk / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")  # written before the run: never lost
    fill(tiny_disk, leave_pages=2)  # the test log and results.jsonl fit, the chart does not
    res = validate(out)
    assert res.returncode == 4, res.stdout + res.stderr
    line = one_line(res.stderr)
    assert line.startswith("disk full:") and f"writing {out / 'chart.svg'}" in line
    assert f"kept in {out}: notes.txt, results.jsonl (each file whole)" in line
    assert sorted(p.name for p in out.iterdir()) == [
        "logs",
        "notes.txt",
        "results.jsonl",
    ]  # no temp
    assert [p.name for p in (out / "logs").iterdir()] == ["patchgym__csvlite-1.gold.log.gz"]
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [r["outcome"] for r in rows] == ["ok"]
    assert (out / "notes.txt").read_text() == "mine\n"
    assert "all 1 tasks behave" not in res.stdout


def test_no_room_at_all_says_nothing_was_kept(tiny_disk: Path) -> None:
    out = tiny_disk / "run"
    out.mkdir()
    fill(tiny_disk, leave_pages=0)
    res = validate(out)
    assert res.returncode == 4, res.stdout + res.stderr
    line = one_line(res.stderr)
    assert f"writing {out / 'results.jsonl'}" in line and f"kept in {out}: nothing" in line
    assert list(out.iterdir()) == []
