"""Read dataset rows from JSONL, parquet, or Hugging Face ``datasets``.

Hub names (``R2E-Gym/R2E-Gym-Lite``) go through ``datasets.load_dataset`` for users
who can reach the hub; folders written by ``Dataset.save_to_disk`` go through
``load_from_disk``. ``datasets`` is an optional extra: ``pip install patchgym-envs-swe[hf]``.

Contract: :func:`iter_rows` yields one :class:`SourceRow` per row, each knowing where it
came from (``tasks.jsonl:12``, ``x.parquet row 7``, ``name[train] row 3``); a row that
cannot be read at all (not JSON, not UTF-8, not an object) is yielded with ``problem``
set instead of raising, so lenient loading can skip and count it. A file that cannot be
read at all (missing, corrupt parquet) raises :class:`DatasetReadError`, one line naming
the file. ``read_rows`` / ``read_jsonl`` / ``read_parquet`` are the strict, plain-dict
views of the same readers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from patchgym_envs.errors import DatasetReadError, one_line


class SourceRow(NamedTuple):
    """One row and its place in the source; ``data`` is None when ``problem`` says why."""

    where: str
    data: dict[str, Any] | None
    problem: tuple[str, str] | None = None
    """``(field, reason)`` for a row that could not be read as a mapping."""


def _strict(rows: Iterator[SourceRow]) -> Iterator[dict[str, Any]]:
    for row in rows:
        if row.data is None:
            reason = row.problem[1] if row.problem else "unreadable row"
            raise DatasetReadError(f"{row.where}: {reason}")
        yield row.data


def _decode_line(raw: bytes, where: str) -> SourceRow:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start]
        return SourceRow(
            where, None, ("<line>", f"not UTF-8 (byte 0x{bad:02x} at column {exc.start + 1})")
        )
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        return SourceRow(
            where, None, ("<line>", f"not valid JSON ({exc.msg} at column {exc.colno})")
        )
    except RecursionError:
        return SourceRow(where, None, ("<line>", "JSON nested too deeply"))
    if not isinstance(row, dict):
        return SourceRow(
            where, None, ("<line>", f"expected a JSON object per line, got {type(row).__name__}")
        )
    return SourceRow(where, row)


def jsonl_rows(path: str | Path) -> Iterator[SourceRow]:
    """Rows of a JSONL file, blank lines skipped; bytes are decoded per line (never a crash)."""
    p = Path(path)
    try:
        fh = p.open("rb")
    except OSError as exc:
        raise DatasetReadError(f"cannot open JSONL dataset {p}: {exc.strerror}") from None
    with fh:
        for lineno, raw in enumerate(fh, 1):
            if raw.strip():
                yield _decode_line(raw, f"{p}:{lineno}")


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Strict: a line that is not a JSON object raises :class:`DatasetReadError` naming it."""
    return _strict(jsonl_rows(path))


def json_rows(path: str | Path) -> Iterator[SourceRow]:
    """A ``.json`` file: one object, an array of objects, or JSON lines."""
    p = Path(path)
    try:
        data_bytes = p.read_bytes()
    except OSError as exc:
        raise DatasetReadError(f"cannot open JSON dataset {p}: {exc.strerror}") from None
    try:
        data = json.loads(data_bytes.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        yield from jsonl_rows(p)
        return
    rows = data if isinstance(data, list) else [data]
    for i, row in enumerate(rows):
        where = f"{p} item {i}"
        if isinstance(row, dict):
            yield SourceRow(where, row)
        else:
            yield SourceRow(where, None, ("<item>", f"not a JSON object ({type(row).__name__})"))


def read_json(path: str | Path) -> Iterator[dict[str, Any]]:
    return _strict(json_rows(path))


def parquet_rows(path: str | Path, *, batch_size: int = 256) -> Iterator[SourceRow]:
    """Rows of a parquet file; a corrupt file is a :class:`DatasetReadError` naming it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = Path(path)
    errors = (OSError, ValueError, pa.ArrowException)
    try:
        pf = pq.ParquetFile(p)
    except FileNotFoundError:
        raise DatasetReadError(f"cannot open parquet dataset {p}: no such file") from None
    except errors as exc:
        raise DatasetReadError(f"{p}: not a readable parquet file ({one_line(str(exc))})") from None
    n = 0
    try:
        for batch in pf.iter_batches(batch_size=batch_size):
            for row in batch.to_pylist():
                yield SourceRow(f"{p} row {n}", row)
                n += 1
    except errors as exc:
        raise DatasetReadError(
            f"{p}: corrupt parquet data after row {n} ({one_line(str(exc))})"
        ) from None


def read_parquet(path: str | Path, *, batch_size: int = 256) -> Iterator[dict[str, Any]]:
    return _strict(parquet_rows(path, batch_size=batch_size))


def _require_datasets() -> Any:
    try:
        import datasets
    except ImportError as exc:
        raise ImportError(
            "reading Hugging Face datasets needs the `datasets` package: "
            "pip install 'patchgym-envs-swe[hf]'"
        ) from exc
    return datasets


def hf_rows(name_or_path: str | Path, *, split: str | None = "train") -> Iterator[SourceRow]:
    """Rows of a ``save_to_disk`` folder or a hub dataset (``split`` picks one split)."""
    datasets = _require_datasets()
    p = Path(name_or_path)
    try:
        if p.is_dir():
            loaded = datasets.load_from_disk(str(p))
        else:
            loaded = datasets.load_dataset(str(name_or_path), split=split)
    except ImportError:
        raise
    except Exception as exc:  # third-party boundary: hub, cache and format errors of any type
        raise DatasetReadError(
            f"cannot load dataset {name_or_path} ({type(exc).__name__}: {one_line(str(exc))})"
        ) from None
    if isinstance(loaded, datasets.DatasetDict):
        if split not in loaded:
            raise DatasetReadError(f"{name_or_path} has splits {sorted(loaded)}, not {split!r}")
        loaded = loaded[split]
    for i, row in enumerate(loaded):
        yield SourceRow(f"{name_or_path}[{split}] row {i}", dict(row))


def read_hf(name_or_path: str | Path, *, split: str | None = "train") -> Iterator[dict[str, Any]]:
    return _strict(hf_rows(name_or_path, split=split))


def iter_rows(source: str | Path, *, split: str | None = "train") -> Iterator[SourceRow]:
    """Dispatch on the source: ``.jsonl``/``.json`` lines, ``.parquet``, else ``datasets``."""
    s = str(source)
    if s.endswith(".jsonl"):
        return jsonl_rows(s)
    if s.endswith(".json"):
        return json_rows(s)
    if s.endswith(".parquet"):
        return parquet_rows(s)
    if (
        Path(s).is_dir()
        and not (Path(s) / "dataset_dict.json").exists()
        and not (Path(s) / "dataset_info.json").exists()
    ):
        files = sorted(Path(s).glob(f"{split or '*'}*.parquet")) or sorted(
            Path(s).glob("*.parquet")
        )
        if files:
            return (row for f in files for row in parquet_rows(f))
        raise DatasetReadError(
            f"{s} is neither a `save_to_disk` folder nor a folder of parquet files"
        )
    return hf_rows(s, split=split)


def read_rows(source: str | Path, *, split: str | None = "train") -> Iterator[dict[str, Any]]:
    """Strict plain-dict view of :func:`iter_rows` (an unreadable row raises)."""
    return _strict(iter_rows(source, split=split))
