"""Which keys a config node accepts, and "did you mean" for a misspelt one.

The allowed keys of a node are the fields of its typed config class (for ``sandbox``, the
installed backend's own class) together with the keys its composed YAML holds, so the list
names every key a user may set on the command line, even those the YAML leaves at default.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel


def allowed_keys(data: Mapping[str, Any], path: Sequence[str]) -> list[str]:
    """The keys of the node at ``path`` (``("env",)``) of the composed ``data``."""
    from patchgym_trainer.schema import AppConfig

    node: Any = data
    model: type[BaseModel] | None = AppConfig
    for part in path:
        node = node.get(part) if isinstance(node, Mapping) else None
        model = _field_model(model, part, node)
    keys = set(node) if isinstance(node, Mapping) else set()
    if model is not None:
        keys |= {f.alias or name for name, f in model.model_fields.items()}
    return sorted(str(k) for k in keys)


def unknown_key(key: str, allowed: Sequence[str]) -> str:
    """``unknown key env.max_step — did you mean `env.max_steps`? allowed under env: ...``"""
    parent, _, leaf = key.rpartition(".")
    prefix = f"{parent}." if parent else ""
    close = difflib.get_close_matches(leaf, allowed, n=1, cutoff=0.6)
    hint = f" — did you mean `{prefix}{close[0]}`?" if close else ""
    where = f"under {parent}" if parent else "at the top level"
    return f"unknown config key {key}{hint} (allowed {where}: {', '.join(allowed) or 'none'})"


def _field_model(model: type[BaseModel] | None, part: str, node: Any) -> type[BaseModel] | None:
    if model is None:
        return None
    for name, field in model.model_fields.items():
        if part not in (name, field.alias):
            continue
        if name == "sandbox" and isinstance(node, Mapping):
            from patchgym_sandbox.registry import load_config

            try:
                return type(load_config(dict(node)))
            except Exception:  # an invalid node names no class: fall back to the YAML keys
                return None
        return _model_in(field.annotation)
    return None


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None
