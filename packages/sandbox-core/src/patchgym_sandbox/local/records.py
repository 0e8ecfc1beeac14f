"""Lease records of local sandboxes, one JSON file per sandbox, for ``list`` and ``reap``."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field


class Record(BaseModel):
    id: str
    root: str
    labels: dict[str, str] = Field(default_factory=dict)
    mounted: bool = False
    mounts: list[str] = Field(default_factory=list)
    """Host mount points to detach at removal, innermost first."""
    cgroups: list[str] = Field(default_factory=list)
    """cgroup directories whose processes die at removal."""
    snapshot: str | None = None
    """The fork snapshot beneath this sandbox (``forks``): its reference is dropped at
    removal, and the last one removes the snapshot."""


def record_path(state_dir: Path, sandbox_id: str) -> Path:
    return state_dir / sandbox_id / "record.json"


def write(state_dir: Path, rec: Record) -> None:
    path = record_path(state_dir, rec.id)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(rec.model_dump_json())
    tmp.replace(path)


def read_all(state_dir: Path) -> list[Record]:
    out: list[Record] = []
    if not state_dir.is_dir():
        return out
    for path in state_dir.glob("*/record.json"):
        try:
            out.append(Record.model_validate(json.loads(path.read_text())))
        except (OSError, ValueError):
            continue
    return out


def read(state_dir: Path, sandbox_id: str) -> Record | None:
    try:
        return Record.model_validate_json(record_path(state_dir, sandbox_id).read_text())
    except (OSError, ValueError):
        return None
