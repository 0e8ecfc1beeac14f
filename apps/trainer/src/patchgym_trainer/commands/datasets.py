"""``patchgym datasets convert|register|info``.

``register`` follows rLLM's ``DatasetRegistry`` layout so rLLM trainers find the data by
name: ``$RLLM_HOME/datasets/<name>/<split>.parquet`` holds one row per task (the task
fields, what rLLM's ``SWEEnv.from_dict`` receives) and ``<split>_verl.parquet`` the verl
layout (``prompt`` placeholder, ``extra_info`` = the task); a ``registry.json`` beside
the datasets lists names and splits in rLLM's v2 format. Without ``RLLM_HOME`` the root is ``~/.rllm``.

rLLM v0.2.x reads a different registry: ``DatasetRegistry._REGISTRY_FILE`` is
``<installed rllm package>/registry/dataset_registry.json`` (``rllm/data/dataset.py:165-166``
at v0.2.1.post1), a flat ``{name: {split: absolute path of <split>.parquet}}``; the verl
file is found by replacing ``.parquet`` with ``_verl.parquet``. ``--rllm-version``
picks which layouts are written: ``current``, ``v0.2`` or ``both`` (the default; ``v0.2``
is written where an rLLM package is importable, and skipped with a note otherwise).
The current rLLM also falls back to that legacy file, so ``both`` serves both.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.table import Table

from patchgym_envs import Task, write_jsonl, write_verl_parquet
from patchgym_envs.loading import group_by_image
from patchgym_trainer.datasets import load_dataset
from patchgym_trainer.errors import TrainerError
from patchgym_trainer.schema import AppConfig


def rllm_home() -> Path:
    return Path(os.environ.get("RLLM_HOME", Path.home() / ".rllm")).expanduser()


def registry_dir() -> Path:
    return rllm_home() / "datasets"


def _load(cfg: AppConfig, console: Console) -> list[Task]:
    report = load_dataset(cfg.dataset)
    console.print(report.summary())
    if not report.tasks:
        raise TrainerError(f"dataset {cfg.dataset.name!r} produced no tasks")
    return report.tasks


def convert(cfg: AppConfig, out: Path, console: Console) -> Path:
    tasks = _load(cfg, console)
    if out.suffix == ".jsonl":
        write_jsonl(tasks, out)
    elif out.suffix == ".parquet":
        write_verl_parquet(tasks, out, data_source=cfg.dataset.name, split=cfg.dataset.split)
    else:
        raise TrainerError(f"--out {out} must end in .parquet (verl/rLLM) or .jsonl (tasks)")
    console.print(f"wrote {len(tasks)} tasks to {out}")
    return out


def write_task_parquet(tasks: list[Task], path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist([t.to_row() for t in tasks]), path)
    return path


RLLMVersion = Literal["current", "v0.2", "both"]


def legacy_registry_file() -> Path | None:
    """rLLM v0.2.x's registry file inside the importable ``rllm`` package (None: not installed)."""
    spec = importlib.util.find_spec("rllm")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        if (Path(root) / "data").is_dir():
            return Path(root).resolve() / "registry" / "dataset_registry.json"
    return None


def register(
    cfg: AppConfig, name: str, console: Console, rllm_version: RLLMVersion = "both"
) -> Path:
    if rllm_version not in ("current", "v0.2", "both"):
        raise TrainerError(f"--rllm-version {rllm_version!r} — allowed: current, v0.2, both")
    legacy = legacy_registry_file() if rllm_version != "current" else None
    if rllm_version == "v0.2" and legacy is None:
        raise TrainerError(
            "--rllm-version v0.2 writes into the installed rLLM package's registry, and no "
            "`rllm` package is importable here; install rLLM v0.2.x in this environment"
        )
    tasks = _load(cfg, console)
    split = cfg.dataset.split
    folder = registry_dir() / name
    raw = write_task_parquet(tasks, folder / f"{split}.parquet")
    write_verl_parquet(tasks, folder / f"{split}_verl.parquet", data_source=name, split=split)
    if rllm_version != "v0.2":
        update_registry(name, split, raw, len(tasks), source=cfg.dataset.path or cfg.dataset.source)
    if legacy is not None:
        update_legacy_registry(legacy, name, split, raw)
        console.print(f"rLLM v0.2 registry: {legacy}")
    elif rllm_version == "both":
        console.print("no rLLM package importable: wrote the current layout only (v0.2 skipped)")
    console.print(f"registered {name}/{split}: {len(tasks)} tasks in {folder}")
    return folder


def update_legacy_registry(index_path: Path, name: str, split: str, path: Path) -> Path:
    """rLLM v0.2.x's ``dataset_registry.json``: ``{name: {split: absolute parquet path}}``."""
    index: dict[str, Any] = {}
    if index_path.is_file():
        try:
            index = json.loads(index_path.read_text())
        except json.JSONDecodeError:
            index = {}
    index.setdefault(name, {})[split] = str(path.resolve())
    index_path.parent.mkdir(parents=True, exist_ok=True)
    index_path.write_text(json.dumps(index, indent=2))
    return index_path


def update_registry(name: str, split: str, path: Path, rows: int, *, source: str) -> Path:
    """rLLM's v2 ``registry.json``: ``{"version": 2, "datasets": {name: {metadata, splits}}}``."""
    index_path = registry_dir() / "registry.json"
    index: dict[str, Any] = json.loads(index_path.read_text()) if index_path.is_file() else {}
    if index.get("version") != 2:
        index = {"version": 2, "datasets": {}}
    entry = index["datasets"].setdefault(name, {"metadata": {}, "splits": {}})
    entry["metadata"].update(source=source, category="swe", description="patchgym tasks")
    entry["splits"][split] = {
        "path": str(path.relative_to(registry_dir())),
        "num_examples": rows,
        "fields": sorted(Task.model_fields),
    }
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True))
    return index_path


def info(name: str | None, console: Console) -> None:
    root = registry_dir()
    if name is None:
        names = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        if not names:
            console.print(f"no datasets registered under {root}")
            return
        table = Table(title=f"datasets in {root}")
        table.add_column("name", overflow="fold")
        table.add_column("splits", overflow="fold")
        for n in names:
            splits = sorted(
                p.stem for p in (root / n).glob("*.parquet") if not p.stem.endswith("_verl")
            )
            table.add_row(n, ", ".join(splits))
        console.print(table)
        return
    folder = root / name
    if not folder.is_dir():
        known = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        raise TrainerError(
            f"no dataset {name!r} under {root} — registered: {', '.join(known) or 'none'}"
        )
    table = Table(title=f"{name} ({folder})")
    for col in ("split", "rows", "images", "formats", "verl file"):
        table.add_column(col, overflow="fold")
    import pyarrow.parquet as pq

    for path in sorted(folder.glob("*.parquet")):
        if path.stem.endswith("_verl"):
            continue
        rows = pq.read_table(path).to_pylist()
        tasks = [Task.model_validate(r) for r in rows]
        formats: dict[str, int] = {}
        for t in tasks:
            formats[t.source_format] = formats.get(t.source_format, 0) + 1
        verl = folder / f"{path.stem}_verl.parquet"
        table.add_row(
            path.stem,
            str(len(tasks)),
            str(len(group_by_image(tasks))),
            ", ".join(f"{k}: {v}" for k, v in formats.items()),
            verl.name if verl.is_file() else "-",
        )
    console.print(table)
