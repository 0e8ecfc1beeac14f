"""Phase traces: where an episode's time goes, as totals and as OpenTelemetry spans.

:class:`PhaseClock` is always on and costs a ``time.monotonic()`` pair per phase: it sums
seconds per phase name (``create``, ``setup``, ``tool``, ``generation``, ``grading``,
``close``) and the sandbox-seconds (sandbox up, from the start of ``create`` to the end of
``close``) that a rollout result reports for cost. When the ``otel`` extra is installed
(``pip install 'patchgym-sandbox-core[otel]'``), each phase is also a span, child of the
episode's span; spans go wherever the process's tracer provider sends them, which
:func:`configure` sets up for an OTLP endpoint and/or a JSONL file. Without the extra,
or without a configured provider, the spans are no-ops.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from patchgym_sandbox.errors import ConfigError

TRACER_NAME = "patchgym"
AttrValue = str | int | float | bool


def _tracer() -> Any:
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace.get_tracer(TRACER_NAME)


class PhaseClock:
    """Seconds per phase of one episode (see the module docstring)."""

    def __init__(self, name: str = "episode", attributes: Mapping[str, AttrValue] | None = None):
        self.name = name
        self.attributes = dict(attributes or {})
        self.totals: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self._sandbox_up: float | None = None
        self.sandbox_s = 0.0
        self._tracer = _tracer()
        self._root: Any = None

    def begin(self) -> None:
        """Open the episode's root span (idempotent); phases become its children."""
        if self._tracer is not None and self._root is None:
            self._root = self._tracer.start_span(self.name, attributes=self.attributes)

    def end(self, **attributes: AttrValue) -> None:
        if self._root is not None:
            self._root.set_attributes({**attributes, "sandbox_s": round(self.sandbox_s, 3)})
            self._root.end()
            self._root = None

    @contextmanager
    def phase(self, name: str, **attributes: AttrValue) -> Iterator[None]:
        """Time a phase; a span named ``name`` when tracing is on."""
        if name == "create" and self._sandbox_up is None:
            self._sandbox_up = time.monotonic()
        t0 = time.monotonic()
        span = None
        if self._tracer is not None:
            from opentelemetry import trace

            self.begin()
            ctx = trace.set_span_in_context(self._root)
            span = self._tracer.start_span(name, context=ctx, attributes=attributes)
        try:
            yield
        except BaseException as exc:
            if span is not None:
                span.record_exception(exc)
            raise
        finally:
            now = time.monotonic()
            self.totals[name] = self.totals.get(name, 0.0) + now - t0
            self.counts[name] = self.counts.get(name, 0) + 1
            if name == "close" and self._sandbox_up is not None:
                self.sandbox_s += now - self._sandbox_up
                self._sandbox_up = None
            if span is not None:
                span.end()

    def record(self, name: str, seconds: float, *, within: str | None = None) -> None:
        """Count ``seconds`` already spent as phase ``name`` (a span ending now), moved out
        of phase ``within`` when it was timed inside that one (admission inside create)."""
        if seconds <= 0:
            return
        self.totals[name] = self.totals.get(name, 0.0) + seconds
        self.counts[name] = self.counts.get(name, 0) + 1
        if within is not None and within in self.totals:
            self.totals[within] = max(0.0, self.totals[within] - seconds)
        if self._tracer is not None:
            from opentelemetry import trace

            self.begin()
            end_ns = time.time_ns()
            span = self._tracer.start_span(
                name,
                context=trace.set_span_in_context(self._root),
                start_time=end_ns - int(seconds * 1e9),
            )
            span.end(end_time=end_ns)

    def summary(self) -> dict[str, float]:
        """Rounded seconds per phase, for a result record."""
        return {k: round(v, 4) for k, v in self.totals.items()}


class JsonlSpanExporter:
    """An OpenTelemetry span exporter writing one JSON object per finished span."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        lines = [json.dumps(_span_record(s), default=str) for s in spans]
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write("".join(line + "\n" for line in lines))
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _span_record(span: Any) -> dict[str, Any]:
    ctx = span.get_span_context()
    parent = span.parent
    return {
        "name": span.name,
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "parent_id": f"{parent.span_id:016x}" if parent is not None else None,
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "duration_s": (span.end_time - span.start_time) / 1e9 if span.end_time else None,
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
    }


def configure(*, otlp_endpoint: str | None = None, jsonl_path: str | Path | None = None) -> Any:
    """Install a tracer provider exporting to OTLP/HTTP and/or a JSONL file; returns it.

    Call once per process, before episodes start; flush with ``provider.shutdown()``.
    """
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
    except ImportError as exc:
        raise ConfigError(
            "tracing needs the otel extra: pip install 'patchgym-sandbox-core[otel]'"
        ) from exc
    if otlp_endpoint is None and jsonl_path is None:
        raise ConfigError("tracing: set otlp_endpoint and/or jsonl_path")
    provider = TracerProvider(resource=Resource.create({"service.name": "patchgym"}))
    if jsonl_path is not None:
        # JsonlSpanExporter has SpanExporter's methods; it does not subclass it so that this
        # module imports without the optional SDK
        jsonl = cast(SpanExporter, JsonlSpanExporter(jsonl_path))
        provider.add_span_processor(BatchSpanProcessor(jsonl))
    if otlp_endpoint is not None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_endpoint)))
    trace.set_tracer_provider(provider)
    return provider
