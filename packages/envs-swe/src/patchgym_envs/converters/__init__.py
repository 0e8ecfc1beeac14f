"""Dataset rows -> :class:`~patchgym_envs.task.Task`, one converter per published format.

``convert_rows`` is the entry point: strict mode raises :class:`BadRowError` on the first
bad row (naming row index, id and field); lenient mode skips it and lists it in the
returned :class:`ConversionReport`. A row is never turned into a silently wrong task.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from patchgym_envs.converters.options import ConvertOptions
from patchgym_envs.converters.r2egym import from_r2egym, from_swebench_r2e
from patchgym_envs.converters.swebench import from_swebench, from_swegym
from patchgym_envs.converters.swesmith import from_swesmith
from patchgym_envs.errors import BadRowError, RowError, UnknownFormatError, one_line
from patchgym_envs.readers import SourceRow
from patchgym_envs.task import Task

Format = Literal["auto", "task", "r2egym", "swebench", "swebench_r2e", "swesmith", "swegym"]

Converter = Callable[[Mapping[str, Any], ConvertOptions], Task]


def from_task_row(row: Mapping[str, Any], opts: ConvertOptions) -> Task:
    """A row written by :func:`patchgym_envs.writers` (a ``Task`` dump, maybe flattened)."""
    return Task.model_validate({k: v for k, v in row.items() if k in Task.model_fields})


CONVERTERS: dict[str, Converter] = {
    "task": from_task_row,
    "r2egym": from_r2egym,
    "swebench": from_swebench,
    "swebench_r2e": from_swebench_r2e,
    "swesmith": from_swesmith,
    "swegym": from_swegym,
}

ID_FIELDS = ("instance_id", "id", "docker_image", "commit_hash")


def unwrap(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """A verl/rLLM parquet row keeps the task in ``extra_info``; take it out."""
    extra = row.get("extra_info")
    if extra is not None and "prompt" in row:
        if isinstance(extra, str):
            try:
                extra = json.loads(extra)
            except (json.JSONDecodeError, RecursionError) as exc:
                raise RowError("extra_info", f"not valid JSON ({one_line(str(exc))})") from None
        if isinstance(extra, Mapping):
            return extra
    return row


def detect_format(row: Mapping[str, Any]) -> str:
    """Guess a row's format from its columns (see each converter's docstring)."""
    row = unwrap(row)
    if "source_format" in row and ("eval_script" in row or "problem_statement" in row):
        return "task"
    if "parsed_commit_content" in row:
        return "r2egym"
    if "parsed_commit" in row and "run_tests" in row:
        return "swebench_r2e"
    if "image_name" in row and "instance_id" in row:
        return "swesmith"
    if "instance_id" in row and "test_patch" in row:
        return "swegym" if isinstance(row.get("FAIL_TO_PASS"), list) else "swebench"
    raise UnknownFormatError(
        f"cannot tell the dataset format from columns {sorted(row)[:12]}; pass format= one of "
        f"{', '.join(CONVERTERS)}"
    )


def row_id(row: Mapping[str, Any]) -> str | None:
    for key in ID_FIELDS:
        value = row.get(key)
        if isinstance(value, str) and value:
            return value[:200]
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


class UnknownRowFormat(BadRowError, UnknownFormatError):
    """``format=auto`` could not tell a row's format from its columns."""


MALFORMED = (TypeError, KeyError, AttributeError, IndexError, ValueError, RecursionError)
"""What a converter may raise on a row of unexpected shape (reported as a bad row)."""


class SkippedRow(BaseModel):
    index: int
    where: str | None = None
    id: str | None
    field: str
    reason: str


class ConversionReport(BaseModel):
    """Tasks made and rows skipped (lenient mode)."""

    tasks: list[Task] = Field(default_factory=list)
    skipped: list[SkippedRow] = Field(default_factory=list)
    formats: dict[str, int] = Field(default_factory=dict)
    rows_read: int = 0

    @property
    def ok(self) -> bool:
        return not self.skipped

    def summary(self) -> str:
        lines = [f"{len(self.tasks)} tasks, {len(self.skipped)} rows skipped"]
        lines += [
            f"  {s.where + ': ' if s.where else ''}row {s.index} (id {s.id!r}), "
            f"field {s.field!r}: {s.reason}"
            for s in self.skipped
        ]
        return "\n".join(lines)


def convert_row(
    row: Mapping[str, Any],
    fmt: str = "auto",
    options: ConvertOptions | None = None,
    *,
    index: int = 0,
    where: str | None = None,
) -> Task:
    """One row -> a Task, or :class:`BadRowError` naming where, index, id and field.

    Whatever is wrong with the row (missing key, wrong type, malformed nested data) is a
    :class:`BadRowError`; only an unknown ``fmt`` name is an :class:`UnknownFormatError`.
    """
    opts = options or ConvertOptions()
    if fmt != "auto" and fmt not in CONVERTERS:
        raise UnknownFormatError(f"unknown dataset format {fmt!r} — known: {', '.join(CONVERTERS)}")
    if not isinstance(row, Mapping):
        raise BadRowError(
            index, None, "<row>", f"expected a mapping, got {type(row).__name__}", where=where
        )
    try:
        inner = unwrap(row)
    except RowError as exc:
        raise BadRowError(index, row_id(row), exc.field, exc.reason, where=where) from None
    tid = row_id(inner)
    if fmt == "auto":
        try:
            name = detect_format(inner)
        except UnknownFormatError as exc:
            raise UnknownRowFormat(index, tid, "<columns>", str(exc), where=where) from None
    else:
        name = fmt
    try:
        return CONVERTERS[name](inner, opts)
    except RowError as exc:
        raise BadRowError(index, tid, exc.field, exc.reason, where=where) from exc
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "<row>"
        raise BadRowError(index, tid, field, err["msg"], where=where) from exc
    except MALFORMED as exc:
        reason = f"malformed {name} row ({type(exc).__name__}: {one_line(str(exc), 200)})"
        raise BadRowError(index, tid, "<row>", reason, where=where) from exc


def convert_rows(
    rows: Iterable[Mapping[str, Any] | SourceRow],
    fmt: str = "auto",
    options: ConvertOptions | None = None,
    *,
    strict: bool = True,
    limit: int | None = None,
) -> ConversionReport:
    """Convert every row; strict raises on the first bad one, lenient records and skips it.

    ``rows`` are mappings or :class:`SourceRow` items (from :func:`iter_rows`), whose place
    in the file is then named in errors. With ``limit``, reading stops once that many
    tasks are made.
    """
    report = ConversionReport()
    for index, item in enumerate(rows):
        if limit is not None and len(report.tasks) >= limit:
            break
        report.rows_read += 1
        try:
            if isinstance(item, SourceRow):
                if item.data is None:
                    field, reason = item.problem or ("<row>", "unreadable")
                    raise BadRowError(index, None, field, reason, where=item.where)
                task = convert_row(item.data, fmt, options, index=index, where=item.where)
            else:
                task = convert_row(item, fmt, options, index=index)
        except BadRowError as exc:
            if strict:
                raise
            report.skipped.append(
                SkippedRow(
                    index=index, where=exc.where, id=exc.task_id, field=exc.field, reason=exc.reason
                )
            )
            continue
        report.tasks.append(task)
        report.formats[task.source_format] = report.formats.get(task.source_format, 0) + 1
    return report


__all__ = [
    "CONVERTERS",
    "ConversionReport",
    "ConvertOptions",
    "Format",
    "SkippedRow",
    "UnknownRowFormat",
    "convert_row",
    "convert_rows",
    "detect_format",
]
