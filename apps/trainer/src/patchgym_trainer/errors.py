"""Errors of the trainer app (each message says what to do next)."""

from __future__ import annotations


class TrainerError(Exception):
    """Root of the app's errors; the CLI prints these without a traceback."""


class ConfigError(TrainerError, ValueError):
    """A composed config is invalid: the message names the key and the allowed values."""


class MissingExtra(TrainerError, ImportError):
    """An optional engine (verl, rLLM, vLLM) is not installed: the message says how to install it."""


class DiskFull(TrainerError, OSError):
    """An output file could not be written: the disk (or quota) is full. Every file named in
    ``kept`` is complete; the one at ``path`` was not written (nothing of it is left)."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(str(path))
        self.path = str(path)
        self.reason = reason
        self.folder: str | None = None
        self.kept: list[str] = []

    def __str__(self) -> str:
        text = f"{self.reason} writing {self.path}"
        if self.folder is not None:
            text += (
                f"; kept in {self.folder}: {', '.join(self.kept) or 'nothing'} (each file whole)"
            )
        return text + "; free some space (or pass --out <folder on another disk>) and run again"
