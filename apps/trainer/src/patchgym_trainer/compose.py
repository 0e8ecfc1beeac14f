"""Compose a config with Hydra's compose API and validate it into :class:`AppConfig`.

``compose(["sandbox=docker", "dataset=file", "dataset.path=x.jsonl"])`` reads the YAML
groups shipped in ``patchgym_trainer/conf``, applies the overrides, then validates. Every
failure is a :class:`ConfigError` whose message names the key and what is allowed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from patchgym_trainer.errors import ConfigError
from patchgym_trainer.schema import AppConfig

CONF_DIR = Path(__file__).parent / "conf"
_NOT_IN_STRUCT = re.compile(r"Could not override '([^']+)'\. To append to your config use \+")
GROUPS = ("sandbox", "dataset", "agent", "algorithm", "model", "preset")


def group_options(group: str) -> list[str]:
    """The choices of a config group (file names under ``conf/<group>``)."""
    folder = CONF_DIR / group
    return sorted(p.stem for p in folder.glob("*.yaml"))


def compose_raw(overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The composed config as plain data (interpolations resolved), not yet validated.

    A key its YAML leaves out but its typed config accepts (``sandbox.state_dir=/x`` on
    the local backend, whose YAML sets only a few of its keys) is set as if written
    ``+sandbox.state_dir=/x``: Hydra's struct mode would refuse it and suggest the very
    key the user wrote. Any other unknown key is an error naming the close match."""
    overrides = list(overrides)
    for _ in range(len(overrides) + 1):
        try:
            return _compose_raw(overrides)
        except _NotInStruct as exc:
            allowed = _allowed_without(exc.key, overrides)
            if exc.key.rpartition(".")[2] not in allowed:
                from patchgym_trainer.keys import unknown_key

                raise ConfigError(unknown_key(exc.key, allowed)) from None
            overrides = [f"+{o}" if _key_of(o) == exc.key and o[:1] not in "+~" else o
                         for o in overrides]  # fmt: skip
    raise ConfigError(f"invalid overrides {overrides}")  # unreachable: one key per round


class _NotInStruct(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _key_of(override: str) -> str:
    return override.lstrip("+~").partition("=")[0]


def _compose_raw(overrides: Sequence[str]) -> dict[str, Any]:
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    _check_groups(overrides)
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="config", overrides=list(overrides))
        data = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or "?"
        raise ConfigError(_missing_message(str(key), exc)) from None
    except HydraException as exc:
        text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        bad = _NOT_IN_STRUCT.search(text)
        if bad is not None:
            raise _NotInStruct(bad.group(1)) from None
        raise ConfigError(f"invalid overrides {list(overrides)}: {text}") from None
    assert isinstance(data, dict)
    return {str(k): v for k, v in data.items()}


def _allowed_without(key: str, overrides: Sequence[str]) -> list[str]:
    """The keys the node of ``key`` accepts (its typed config's fields and its YAML's
    keys), read from the config composed without that override."""
    from patchgym_trainer.keys import allowed_keys

    rest = [o for o in overrides if _key_of(o) != key]
    try:
        data = compose_raw(rest)
    except ConfigError:
        data = {}
    return allowed_keys(data, key.split(".")[:-1])


def compose(overrides: Sequence[str] = ()) -> AppConfig:
    """Compose and validate (see module docstring)."""
    data = compose_raw(overrides)
    try:
        return AppConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe_validation(exc, data)) from None


def describe_validation(exc: ValidationError, data: dict[str, Any] | None = None) -> str:
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "<root>"
        key = key.replace("validate_", "validate")
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            from patchgym_trainer.keys import allowed_keys, unknown_key

            path = [str(p) for p in err["loc"]]
            allowed = allowed_keys(data or {}, path[:-1])
            allowed = [k for k in allowed if k != path[-1]]
            lines.append(unknown_key(key, allowed))
            continue
        elif err["type"] == "literal_error":
            allowed = err.get("ctx", {}).get("expected", "")
            msg = f"got {err.get('input')!r}; allowed: {allowed}"
        elif err["type"] == "value_error":
            msg = msg.removeprefix("Value error, ")
        lines.append(f"{key}: {msg}")
    return "invalid config: " + "; ".join(lines)


def _missing_message(key: str, exc: Exception) -> str:
    text = str(exc).splitlines()[0]
    if "Missing mandatory value" in text:
        hint = {
            "dataset.path": "dataset.path=<JSONL, parquet or save_to_disk folder>",
            "model.path": "model.path=<local folder or hub id>",
        }.get(key, f"{key}=<value>")
        return f"config key {key} is required: add {hint} to the command line"
    return f"config key {key}: {text}"


def _check_groups(overrides: Sequence[str]) -> None:
    """Name the allowed choices for an unknown group option (before Hydra's longer error)."""
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.lstrip("+~")
        if not sep or key not in GROUPS or value in ("null", ""):
            continue
        options = group_options(key)
        if value not in options:
            raise ConfigError(
                f"unknown {key} {value!r} — allowed: {', '.join(options)} (as {key}=<choice>)"
            )
