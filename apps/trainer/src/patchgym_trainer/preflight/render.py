"""The preflight table (rich), readable at any width and when piped.

Long cells fold onto more lines (never an ellipsis), and the fix of every blocking check is
printed again under the table as one unwrapped line, so a command in it can be copied.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from patchgym_trainer.preflight.rules import Check

STYLE = {"pass": "green", "fail": "bold red", "warn": "yellow", "skip": "dim"}
MARK = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "skip": "skip"}


def render(checks: Sequence[Check], console: Console, *, title: str = "preflight") -> None:
    table = Table(title=title, show_lines=True, expand=True)
    longest_word = max((len(w) for c in checks for w in c.name.split()), default=5)
    table.add_column("check", overflow="fold", width=max(longest_word, 5))
    table.add_column("", no_wrap=True, min_width=4)
    table.add_column("what was seen", overflow="fold", ratio=3)
    table.add_column("fix", overflow="fold", ratio=3)
    for c in checks:
        table.add_row(c.name, f"[{STYLE[c.status]}]{MARK[c.status]}[/]", c.detail, c.fix)
    console.print(table)
    failed = [c for c in checks if c.blocking]
    if failed:
        console.print(f"[bold red]{len(failed)} blocking: {', '.join(c.name for c in failed)}[/]")
        for c in failed:
            if c.fix:
                console.print(f"  fix {c.name}: {c.fix}", markup=False, soft_wrap=True)
    else:
        console.print("[green]all checks passed[/]")
