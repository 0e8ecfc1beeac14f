"""Exceptions raised by patchgym-envs.

Bad dataset rows are :class:`BadRowError` (the message names the row index, the task id
and the field); infrastructure failures keep coming from ``patchgym_sandbox`` as
``InfraError`` subclasses and are never mixed with task outcomes.
"""

from __future__ import annotations


class EnvsError(Exception):
    """Root of every error this package raises."""


class RowError(EnvsError, ValueError):
    """A converter could not read one field of a row (raised inside a converter)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


class DatasetError(EnvsError):
    """Root of the data errors: a dataset that cannot be read, a bad row, an empty dataset."""


class BadRowError(DatasetError, ValueError):
    """A dataset row cannot become a task: one line naming where, row index, id, field, reason.

    ``where`` is the row's place in its source (``tasks.jsonl:12``, ``x.parquet row 7``)
    when the row came from a file.
    """

    def __init__(
        self,
        index: int,
        task_id: str | None,
        field: str,
        message: str,
        *,
        where: str | None = None,
    ) -> None:
        who = f"row {index} (id {task_id!r})" if task_id else f"row {index} (no id)"
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}{who}, field {field!r}: {one_line(message)}")
        self.index = index
        self.task_id = task_id
        self.field = field
        self.reason = one_line(message)
        self.where = where


class UnknownFormatError(DatasetError, LookupError):
    """A dataset format name that no converter handles."""


class DatasetReadError(DatasetError, OSError):
    """A dataset file or folder could not be read."""


class EmptyDatasetError(DatasetError, ValueError):
    """A dataset yielded no task (no rows, or every row skipped): never a silent success."""


def one_line(text: str, limit: int = 400) -> str:
    """``text`` on one line (newlines folded), cut to ``limit`` characters."""
    flat = " ".join(part.strip() for part in str(text).splitlines() if part.strip())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class UnknownScaffoldError(EnvsError, LookupError):
    """A tool scaffold name that is not registered."""


class UnknownTaskError(EnvsError, LookupError):
    """A bundled task name that does not exist."""


from patchgym_sandbox.errors import InfraError  # noqa: E402


class SetupFailed(InfraError):
    """A task's setup commands failed: the environment is broken, not the policy."""


class EnvConfigError(EnvsError, ValueError):
    """A bad environment argument (unknown key, unsupported value); the message names it."""


class ImageCleanError(EnvsError):
    """Images pulled as-is could not be reduced to their base commit before a run
    (``patchgym_envs.cleanimages.prepare``); ``failures``: image -> why."""

    hint = ""

    def __init__(self, failures: dict[str, str]) -> None:
        self.failures = dict(failures)
        listed = "; ".join(f"{image}: {one_line(why, 600)}" for image, why in failures.items())
        super().__init__(
            f"{len(failures)} image(s) pulled as-is could not be reduced to their base "
            f"commit ({self.hint}): {listed}"
        )


class ImageCleanDataError(ImageCleanError, DatasetError):
    """The reduction failed inside the image: the data, not the machine, is at fault."""

    hint = (
        "the script failed inside the image: its repository is broken or lacks the task's "
        "base_commit; fix the image or drop those rows"
    )


class ImageCleanInfraError(ImageCleanError, InfraError):
    """The backend could not derive the images: the machine, not the data, is at fault."""

    hint = (
        "the backend failed: an unreachable engine, a missing image, a full disk; fix that "
        "and run again"
    )
