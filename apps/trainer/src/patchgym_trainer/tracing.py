"""Phase traces for a command: ``run.trace_jsonl`` / ``run.trace_otlp`` (the ``otel`` extra)."""

from __future__ import annotations

from typing import Any

from patchgym_trainer.errors import TrainerError
from patchgym_trainer.schema import RunConfig


def start(run: RunConfig) -> Any | None:
    """A tracer provider exporting this process's episode spans, or None when none is asked."""
    if run.trace_jsonl is None and run.trace_otlp is None:
        return None
    from patchgym_sandbox import ConfigError
    from patchgym_sandbox.tracing import configure

    try:
        return configure(otlp_endpoint=run.trace_otlp, jsonl_path=run.trace_jsonl)
    except ConfigError as exc:
        raise TrainerError(f"run.trace_jsonl/run.trace_otlp: {exc}") from None
