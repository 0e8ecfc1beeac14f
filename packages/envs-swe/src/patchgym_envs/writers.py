"""Write tasks as JSONL or as verl / rLLM parquet.

verl's ``RLHFDataset`` reads ``prompt`` (chat messages), ``data_source``, ``ability``,
``reward_model`` and passes ``extra_info`` through to the agent loop; rLLM's
``SWEEnv.from_dict`` receives ``extra_info``. Our ``prompt`` is a placeholder (the
agent builds the real one from the task); ``extra_info`` is the task itself
(:meth:`Task.to_row`) plus ``index`` and ``split``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from patchgym_envs.task import Task


def verl_row(task: Task, index: int, *, data_source: str, split: str) -> dict[str, Any]:
    return {
        "data_source": data_source,
        "prompt": [{"role": "user", "content": task.problem_statement}],
        "ability": "software-engineering",
        "reward_model": {"style": "rule", "ground_truth": task.id},
        "extra_info": {**task.to_row(), "index": index, "split": split},
    }


def write_verl_parquet(
    tasks: Iterable[Task], path: str | Path, *, data_source: str = "patchgym", split: str = "train"
) -> Path:
    """One parquet row per task in the verl / rLLM layout; returns the path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [verl_row(t, i, data_source=data_source, split=split) for i, t in enumerate(tasks)]
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), out)
    return out


def jsonl_line(task: Task) -> str:
    """``task`` as one line of a ``task``-format JSONL file."""
    return json.dumps(task.model_dump(mode="json"), ensure_ascii=False) + "\n"


def write_jsonl(tasks: Iterable[Task], path: str | Path) -> Path:
    """One JSON task per line (``Task.model_dump``), readable with format ``task``."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for task in tasks:
            fh.write(jsonl_line(task))
    return out
