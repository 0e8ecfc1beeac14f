"""Expected failures -> one line and a documented exit code; anything else is a bug.

The table (also in the README):

| code | meaning |
|---|---|
| 0 | success |
| 1 | the run finished and its result is bad (a task misbehaves, preflight blocks, every rollout infra-failed) |
| 2 | usage or configuration: a CLI option, a Hydra override, a config key, a sandbox config |
| 3 | data: a dataset that cannot be read, a bad row (strict mode), an empty dataset |
| 4 | environment: a backend or endpoint that cannot be reached, a missing extra, an infrastructure failure, a full disk |
| 70 | a bug: the traceback is printed (please report it) |
| 130 / 143 | interrupted by SIGINT / SIGTERM (sandboxes of the run are closed first) |
"""

from __future__ import annotations

from typing import NamedTuple

from patchgym_envs.errors import DatasetError, one_line
from patchgym_sandbox.errors import (
    BackendNotInstalled,
    InfraError,
    IsolationUnavailable,
)
from patchgym_sandbox.errors import (
    ConfigError as SandboxConfigError,
)
from patchgym_trainer.errors import ConfigError, DiskFull, TrainerError

OK, BAD_RESULT, USAGE, DATA, ENVIRONMENT, BUG = 0, 1, 2, 3, 4, 70
SIGINT_EXIT, SIGTERM_EXIT = 130, 143


class Failure(NamedTuple):
    code: int
    kind: str
    message: str


def classify(exc: BaseException) -> Failure | None:
    """The exit code and one-line message of an expected error; None for a bug."""
    if isinstance(exc, ConfigError | SandboxConfigError):
        return Failure(USAGE, "config error", one_line(str(exc), 2000))
    if isinstance(exc, DatasetError):
        return Failure(DATA, "data error", one_line(str(exc), 2000))
    if isinstance(
        exc, InfraError | IsolationUnavailable | BackendNotInstalled | ImportError | ConnectionError
    ):
        return Failure(ENVIRONMENT, "unavailable", one_line(f"{exc}", 2000))
    if isinstance(exc, DiskFull):
        return Failure(ENVIRONMENT, "disk full", one_line(str(exc), 2000))
    if isinstance(exc, TrainerError):
        return Failure(USAGE, "error", one_line(str(exc), 2000))
    return None
