"""Run reports: JSONL records, SVG charts drawn by hand and an HTML page with a per-task table.

No plotting library is imported: a chart is a few dozen SVG rectangles, written as text in
a millisecond and shown inline by ``report.html`` (and by notebooks, as ``chart.svg``).
Every file is written whole or not at all (:func:`patchgym_trainer.outputs.write_text`), so
a full disk leaves the files already written intact and names what was kept.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from patchgym_trainer.outputs import write_text

OUTCOME_COLOURS = {
    "ok": "#2e7d32",
    "resolved": "#2e7d32",
    "misbehaves": "#c62828",
    "unresolved": "#9e9e9e",
    "infra": "#ef6c00",
}
PHASE_COLOURS = {
    "create": "#5e35b1",
    "setup": "#8e24aa",
    "generation": "#1e88e5",
    "tool": "#43a047",
    "grading": "#fb8c00",
    "close": "#6d4c41",
}
GREY = "#546e7a"
_ROW, _LABEL_W, _COUNTS_W, _BARS_W, _TOP = 18, 230, 170, 420, 44


def write_jsonl(records: Iterable[BaseModel | Mapping[str, Any]], path: Path) -> Path:
    lines = []
    for rec in records:
        data = rec.model_dump(mode="json") if isinstance(rec, BaseModel) else dict(rec)
        lines.append(json.dumps(data, ensure_ascii=False) + "\n")
    return write_text(path, "".join(lines))


def outcome_svg(
    labels: Sequence[str],
    outcomes: Sequence[str],
    durations: Sequence[float],
    *,
    title: str,
    unit: str = "tasks",
) -> str:
    """Two panels: how many ``unit`` had each outcome, and each one's duration (one bar per
    label, coloured by its outcome). The labels are what the report's table counts."""
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o] = counts.get(o, 0) + 1
    segments = [
        [(d, OUTCOME_COLOURS.get(o, GREY))] for d, o in zip(durations, outcomes, strict=True)
    ]
    bars = [(n, c, OUTCOME_COLOURS.get(n, GREY)) for n, c in counts.items()]
    return _two_panels(
        title=f"{title} ({len(labels)} {unit})",
        left_title=f"{unit} per outcome",
        left=bars,
        left_fmt="{:.0f}",
        labels=labels,
        segments=segments,
        right_title=f"seconds per {unit.removesuffix('s')}, coloured by its outcome",
    )


def phase_svg(labels: Sequence[str], phases: Sequence[Mapping[str, float]], *, title: str) -> str:
    """Where each episode's time went: mean seconds per phase, and stacked bars per episode."""
    names = [n for n in PHASE_COLOURS if any(n in p for p in phases)]
    names += sorted({k for p in phases for k in p} - set(names))
    count = max(1, len(phases))
    bars = [
        (n, sum(p.get(n, 0.0) for p in phases) / count, PHASE_COLOURS.get(n, GREY)) for n in names
    ]
    segments = [[(p.get(n, 0.0), PHASE_COLOURS.get(n, GREY)) for n in names] for p in phases]
    return _two_panels(
        title=f"{title} ({len(labels)} episodes)",
        left_title="mean seconds per phase",
        left=bars,
        left_fmt="{:.2f}",
        labels=labels,
        segments=segments,
        right_title="seconds per episode, stacked by phase",
    )


def _two_panels(
    *,
    title: str,
    left_title: str,
    left: Sequence[tuple[str, float, str]],
    left_fmt: str,
    labels: Sequence[str],
    segments: Sequence[Sequence[tuple[float, str]]],
    right_title: str,
) -> str:
    esc = html.escape
    rows = max(len(labels), len(left), 1)
    height = _TOP + rows * _ROW + 30
    width = _COUNTS_W + _LABEL_W + _BARS_W + 40
    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' font-family='sans-serif' font-size='11'>",
        f"<text x='4' y='14' font-size='13' font-weight='bold'>{esc(title)}</text>",
        f"<text x='4' y='32'>{esc(left_title)}</text>",
        f"<text x='{_COUNTS_W + _LABEL_W}' y='32'>{esc(right_title)}</text>",
    ]
    top = max((v for _, v, _ in left), default=0.0) or 1.0
    for i, (name, value, colour) in enumerate(left):
        y = _TOP + i * _ROW
        w = (_COUNTS_W - 90) * value / top
        out.append(f"<text x='4' y='{y + 12}'>{esc(name)}</text>")
        out.append(
            f"<rect x='80' y='{y + 2}' width='{w:.1f}' height='{_ROW - 5}' fill='{colour}'/>"
        )
        out.append(f"<text x='{84 + w:.1f}' y='{y + 12}'>{left_fmt.format(value)}</text>")
    longest = max((sum(v for v, _ in row) for row in segments), default=0.0) or 1.0
    x0 = _COUNTS_W + _LABEL_W
    for i, (label, row) in enumerate(zip(labels, segments, strict=True)):
        y = _TOP + i * _ROW
        out.append(f"<text x='{x0 - 6}' y='{y + 12}' text-anchor='end'>{esc(_short(label))}</text>")
        x = float(x0)
        for value, colour in row:
            w = (_BARS_W - 50) * value / longest
            out.append(
                f"<rect x='{x:.1f}' y='{y + 2}' width='{w:.1f}' height='{_ROW - 5}' fill='{colour}'/>"
            )
            x += w
        out.append(f"<text x='{x + 4:.1f}' y='{y + 12}'>{sum(v for v, _ in row):.1f}</text>")
    out.append("</svg>")
    return "".join(out)


def _short(label: str, limit: int = 36) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def write_svg(svg: str, path: Path) -> Path:
    return write_text(path, svg)


def write_html(
    path: Path,
    *,
    title: str,
    summary: Mapping[str, Any],
    columns: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    charts: Sequence[str] = (),
    notes: Sequence[str] = (),
    links: Sequence[str] = (),
) -> Path:
    """A single self-contained page: the summary, the SVG charts inline, notes, the table.
    Cells of the ``links`` columns hold space-separated paths relative to the page, shown
    as links."""
    esc = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{esc(title)}</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px;text-align:left}"
        "th{background:#f3f3f3}.ok,.resolved{color:#2e7d32}.misbehaves{color:#c62828;font-weight:bold}"
        ".infra{color:#ef6c00}</style></head><body>",
        f"<h1>{esc(title)}</h1><table>",
    ]
    for key, value in summary.items():
        parts.append(f"<tr><th>{esc(str(key))}</th><td>{esc(str(value))}</td></tr>")
    parts.append("</table>")
    parts += [f"<p>{svg}</p>" for svg in charts]
    parts += [f"<p>{esc(n)}</p>" for n in notes]
    parts.append("<h2>per task</h2><table><tr>")
    parts += [f"<th>{esc(c)}</th>" for c in columns]
    parts.append("</tr>")
    for row in rows:
        cls = esc(str(row.get("outcome", "")))
        parts.append(f"<tr class='{cls}'>")
        parts += [
            f"<td>{_links(row.get(c)) if c in links else esc(_cell(row.get(c)))}</td>"
            for c in columns
        ]
        parts.append("</tr>")
    parts.append("</table></body></html>")
    return write_text(path, "".join(parts))


def _links(value: Any) -> str:
    paths = str(value or "").split()
    return " ".join(
        f"<a href='{html.escape(p, quote=True)}'>{html.escape(Path(p).name)}</a>" for p in paths
    )


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)
