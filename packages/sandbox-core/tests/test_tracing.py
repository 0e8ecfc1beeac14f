"""Phase clock totals and OpenTelemetry spans exported to a JSONL file."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from patchgym_sandbox import ConfigError
from patchgym_sandbox.tracing import PhaseClock, configure


def test_phase_totals_and_sandbox_seconds_without_a_provider() -> None:
    clock = PhaseClock()
    with clock.phase("create"):
        time.sleep(0.02)
    for _ in range(2):
        with clock.phase("tool", tool="execute_bash"):
            time.sleep(0.01)
    with pytest.raises(RuntimeError), clock.phase("grading"):
        raise RuntimeError("boom")
    with clock.phase("close"):
        pass
    assert clock.counts == {"create": 1, "tool": 2, "grading": 1, "close": 1}
    assert clock.totals["tool"] >= 0.02
    assert clock.sandbox_s >= sum(clock.totals.values()) - 1e-3


def test_spans_go_to_jsonl_as_children_of_the_episode(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    provider = configure(jsonl_path=path)
    clock = PhaseClock("episode", {"task_id": "t1"})
    for name in ("create", "tool", "grading", "close"):
        with clock.phase(name):
            pass
    clock.end(done_reason="submitted")
    provider.force_flush()
    spans = [json.loads(line) for line in path.read_text().splitlines()]
    by_name = {s["name"]: s for s in spans}
    assert set(by_name) == {"episode", "create", "tool", "grading", "close"}
    root = by_name["episode"]
    assert root["parent_id"] is None and root["attributes"]["task_id"] == "t1"
    assert root["attributes"]["done_reason"] == "submitted"
    for name in ("create", "tool", "grading", "close"):
        assert by_name[name]["parent_id"] == root["span_id"]
        assert by_name[name]["trace_id"] == root["trace_id"]


def test_configure_needs_a_destination() -> None:
    with pytest.raises(ConfigError, match="otlp_endpoint and/or jsonl_path"):
        configure()
