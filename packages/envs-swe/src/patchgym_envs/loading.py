"""From a dataset source to tasks: read, convert, sort/group by image, truncate."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from patchgym_envs.converters import ConversionReport, ConvertOptions, convert_rows
from patchgym_envs.errors import EmptyDatasetError
from patchgym_envs.readers import iter_rows
from patchgym_envs.task import Task


def image_key(task: Task) -> str:
    return task.image or task.template or ""


def sort_by_image(tasks: Iterable[Task]) -> list[Task]:
    """Stable sort so tasks sharing an image run back to back (warm image caches)."""
    return sorted(tasks, key=image_key)


def group_by_image(tasks: Iterable[Task]) -> dict[str, list[Task]]:
    groups: dict[str, list[Task]] = {}
    for task in tasks:
        groups.setdefault(image_key(task), []).append(task)
    return groups


def load_tasks(
    source: str | Path | Iterable[Mapping[str, Any]],
    fmt: str = "auto",
    *,
    split: str | None = "train",
    strict: bool = True,
    limit: int | None = None,
    sort_images: bool = False,
    options: ConvertOptions | None = None,
) -> ConversionReport:
    """Read ``source`` (path, hub name or rows), convert every row, then sort and truncate.

    ``limit`` keeps the first N tasks *after* sorting by image (so a short run touches
    few images); without sorting, reading stops once N tasks are made.

    A source that yields no task (no rows, or every row skipped in lenient mode) is an
    :class:`EmptyDatasetError`: a run over nothing must not look like a success.
    """
    is_path = isinstance(source, (str, Path))
    rows = iter_rows(source, split=split) if isinstance(source, (str, Path)) else source
    if not sort_images:
        report = convert_rows(rows, fmt, options, strict=strict, limit=limit)
    else:
        report = convert_rows(rows, fmt, options, strict=strict)
        tasks = sort_by_image(report.tasks)
        report.tasks = tasks[:limit] if limit is not None else tasks
    if not report.tasks and limit != 0:
        name = str(source) if is_path else "the given rows"
        if not report.rows_read:
            raise EmptyDatasetError(f"{name}: dataset is empty (no rows)")
        first = report.skipped[0]
        raise EmptyDatasetError(
            f"{name}: no usable task — all {report.rows_read} rows skipped; first: "
            f"{first.where or f'row {first.index}'}, field {first.field!r}: {first.reason}"
        )
    return report
