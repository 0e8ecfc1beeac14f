"""The live progress line of a run: episodes done, their outcomes so far, sandboxes held."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from patchgym_agents.envs_api import SWEEnv
from patchgym_agents.episode import EpisodeResult


class Counters:
    """Outcomes of the episodes finished so far (earlier runs' kept results included)."""

    def __init__(self, finished: Iterable[EpisodeResult] = ()) -> None:
        self.done = 0
        self.resolved = 0
        self.infra = 0
        self.errors = 0
        for r in finished:
            self.add(r)

    def add(self, r: EpisodeResult) -> None:
        self.done += 1
        self.resolved += bool(r.resolved)
        self.infra += r.status == "infra_error"
        self.errors += r.status == "error"


class ProgressLine:
    """A rich progress bar over ``counters`` and the environments in ``live``.

    Built before the run starts so that showing it is the only thing inside the run's
    ``try``; ``enabled=False`` keeps it silent (tests, workers).
    """

    def __init__(self, counters: Counters, live: Collection[SWEEnv], *, enabled: bool) -> None:
        self.counters = counters
        self.live = live
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "resolved {task.fields[resolved]} · infra {task.fields[infra]} · "
                "errors {task.fields[errors]} · sandboxes {task.fields[live]}"
            ),
            TimeElapsedColumn(),
            disable=not enabled,
            transient=False,
        )

    @contextmanager
    def shown(self, total: int) -> Iterator[Callable[[], None]]:
        """Show the bar for ``total`` episodes; yields the function that redraws it."""
        with self.progress:
            bar = self.progress.add_task(
                "episodes", total=total, completed=0, resolved=0, infra=0, errors=0, live=0
            )

            def refresh() -> None:
                c = self.counters
                self.progress.update(
                    bar,
                    completed=c.done,
                    resolved=c.resolved,
                    infra=c.infra,
                    errors=c.errors,
                    live=sum(e.sandbox is not None for e in list(self.live)),
                )

            yield refresh
