"""Every field of every format set to a wrong type: a one-line BadRowError or a task, never a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import load_row

from patchgym_envs import BadRowError, EmptyDatasetError, convert_row, convert_rows, load_tasks

FIXTURES = [
    "swebench_lite.json",
    "swebench_verified.json",
    "swegym.json",
    "swesmith.json",
    "swebench_r2e.json",
    "r2egym_lite.json",
]
WRONG: list[Any] = [None, 7, 1.5, True, [], ["x", 1], {}, {"a": [1]}, "", "{", "[[[[", "\x00"]


@pytest.mark.parametrize("name", FIXTURES)
def test_wrong_types_never_crash(name: str) -> None:
    base = load_row(name)
    for key in list(base):
        for value in WRONG:
            row = dict(base, **{key: value})
            for fmt in ("auto", "task"):
                try:
                    convert_row(row, fmt, index=3, where="f.jsonl:4")
                except BadRowError as exc:
                    text = str(exc)
                    assert "\n" not in text and text.startswith("f.jsonl:4: row 3"), text
    rows = [dict(base, **{k: v}) for k in base for v in WRONG]
    report = convert_rows(rows, strict=False)
    assert report.rows_read == len(rows)
    assert len(report.tasks) + len(report.skipped) == len(rows)


def test_bad_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    good = json.dumps(load_row("swegym.json")).encode()
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(
        b"\n".join([good, b"{not json", b"\xff\xfe bytes", b"[1, 2]", b"[" * 100_000, good, b""])
    )
    report = load_tasks(path, strict=False)
    assert len(report.tasks) == 2
    assert [(s.where, s.field) for s in report.skipped] == [
        (f"{path}:2", "<line>"),
        (f"{path}:3", "<line>"),
        (f"{path}:4", "<line>"),
        (f"{path}:5", "<line>"),
    ]
    reasons = [s.reason for s in report.skipped]
    assert "not valid JSON" in reasons[0] and "not UTF-8 (byte 0xff" in reasons[1]
    assert "JSON object" in reasons[2] and "nested too deeply" in reasons[3]
    with pytest.raises(BadRowError, match=r"mixed.jsonl:2: row 1 \(no id\), field '<line>'"):
        load_tasks(path)


def test_empty_dataset_is_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(EmptyDatasetError, match="empty"):
        load_tasks(empty)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    with pytest.raises(EmptyDatasetError, match=r"all 1 rows skipped; first: .*bad.jsonl:1"):
        load_tasks(bad, strict=False)


def test_corrupt_parquet_is_one_line(tmp_path: Path) -> None:
    from patchgym_envs import DatasetReadError

    path = tmp_path / "x.parquet"
    path.write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")
    with pytest.raises(DatasetReadError) as info:
        load_tasks(path)
    assert "x.parquet" in str(info.value) and "\n" not in str(info.value)
