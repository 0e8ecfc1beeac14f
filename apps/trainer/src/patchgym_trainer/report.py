"""Run reports: JSONL records, a PNG chart (matplotlib) and an HTML page with a per-task table."""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

OUTCOME_COLOURS = {
    "ok": "#2e7d32",
    "resolved": "#2e7d32",
    "misbehaves": "#c62828",
    "unresolved": "#9e9e9e",
    "infra": "#ef6c00",
}


def write_jsonl(records: Iterable[BaseModel | Mapping[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for rec in records:
            data = rec.model_dump(mode="json") if isinstance(rec, BaseModel) else dict(rec)
            fh.write(json.dumps(data, ensure_ascii=False) + "\n")
    return path


def outcome_chart(
    labels: Sequence[str],
    outcomes: Sequence[str],
    durations: Sequence[float],
    path: Path,
    *,
    title: str,
) -> Path:
    """Two panels: outcome counts, and per-item durations coloured by outcome."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o] = counts.get(o, 0) + 1
    height = max(3.0, 0.35 * len(labels) + 1.5)
    fig, (ax1, ax2) = plt.subplots(
        1, 2, figsize=(11, height), gridspec_kw={"width_ratios": [1, 2.2]}
    )
    names = list(counts)
    ax1.bar(
        names, [counts[n] for n in names], color=[OUTCOME_COLOURS.get(n, "#546e7a") for n in names]
    )
    ax1.set_title("outcomes")
    ax1.set_ylabel("count")
    ys = list(range(len(labels)))
    ax2.barh(ys, durations, color=[OUTCOME_COLOURS.get(o, "#546e7a") for o in outcomes])
    ax2.set_yticks(ys)
    ax2.set_yticklabels(labels, fontsize=8)
    ax2.invert_yaxis()
    ax2.set_xlabel("seconds")
    ax2.set_title("duration")
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


PHASE_COLOURS = {
    "create": "#5e35b1",
    "setup": "#8e24aa",
    "generation": "#1e88e5",
    "tool": "#43a047",
    "grading": "#fb8c00",
    "close": "#6d4c41",
}


def phase_chart(
    labels: Sequence[str],
    phases: Sequence[Mapping[str, float]],
    path: Path,
    *,
    title: str,
) -> Path:
    """Where each episode's time went: mean seconds per phase, and stacked bars per episode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in PHASE_COLOURS if any(n in p for p in phases)]
    names += sorted({k for p in phases for k in p} - set(names))
    height = max(3.0, 0.35 * len(labels) + 1.5)
    fig, (ax1, ax2) = plt.subplots(
        1, 2, figsize=(11, height), gridspec_kw={"width_ratios": [1, 2.2]}
    )
    count = max(1, len(phases))
    means = [sum(p.get(n, 0.0) for p in phases) / count for n in names]
    colours = [PHASE_COLOURS.get(n, "#546e7a") for n in names]
    ax1.bar(names, means, color=colours)
    ax1.set_title("mean seconds per phase")
    ax1.tick_params(axis="x", labelrotation=45)
    ys = list(range(len(labels)))
    left = [0.0] * len(labels)
    for name, colour in zip(names, colours, strict=True):
        widths = [p.get(name, 0.0) for p in phases]
        ax2.barh(ys, widths, left=left, color=colour, label=name)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax2.set_yticks(ys)
    ax2.set_yticklabels(labels, fontsize=8)
    ax2.invert_yaxis()
    ax2.set_xlabel("seconds")
    ax2.set_title("phases per episode")
    if names:
        ax2.legend(loc="lower right", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_html(
    path: Path,
    *,
    title: str,
    summary: Mapping[str, Any],
    columns: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    chart: Path | None = None,
    more_charts: Sequence[Path] = (),
    links: Sequence[str] = (),
) -> Path:
    """A single self-contained page (the chart is embedded as a data URI). Cells of the
    ``links`` columns hold space-separated paths relative to the page, shown as links."""
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
    for img in [c for c in (chart, *more_charts) if c is not None and c.is_file()]:
        data = base64.b64encode(img.read_bytes()).decode()
        parts.append(f"<p><img alt='{esc(img.stem)}' src='data:image/png;base64,{data}'></p>")
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
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(parts), encoding="utf-8")
    return path


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
