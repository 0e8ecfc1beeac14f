"""Errors of the trainer app (each message says what to do next)."""

from __future__ import annotations


class TrainerError(Exception):
    """Root of the app's errors; the CLI prints these without a traceback."""


class ConfigError(TrainerError, ValueError):
    """A composed config is invalid: the message names the key and the allowed values."""


class MissingExtra(TrainerError, ImportError):
    """An optional engine (verl, rLLM, vLLM) is not installed: the message says how to install it."""
