"""``prepare(images)``: which images the engine has, pulls of the rest, with progress."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import docker.errors
from docker.utils import parse_repository_tag
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from patchgym_docker.engine import explain
from patchgym_sandbox.backend import PrepareReport

if TYPE_CHECKING:
    from docker import APIClient


def has_image(api: APIClient, image: str) -> bool:
    try:
        api.inspect_image(image)  # type: ignore[no-untyped-call]  # types-docker leaves it unannotated
    except docker.errors.ImageNotFound:
        return False
    except docker.errors.NotFound:
        return False
    return True


def pull_image(api: APIClient, image: str, on_status: Any) -> str | None:
    """Pull ``image``; returns None on success or the engine's reason for failing."""
    repo, tag = parse_repository_tag(image)
    try:
        for event in api.pull(repo, tag=tag or "latest", stream=True, decode=True):
            if "error" in event:
                return str(event["error"]).strip()
            on_status(f"{event.get('status', '')} {event.get('progress', '')}".strip())
    except docker.errors.APIError as exc:
        return explain(exc)
    return (
        None
        if has_image(api, image)
        else "the pull finished but the engine does not list the image"
    )


@contextmanager
def _progress(enabled: bool) -> Iterator[Progress | None]:
    if not enabled:
        yield None
        return
    console = Console(file=sys.stderr)
    with Progress(
        SpinnerColumn(),
        TextColumn("[bold]images[/bold] {task.completed}/{task.total}"),
        BarColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        yield progress


def prepare_images(
    api: APIClient, images: list[str], *, pull: bool, show_progress: bool
) -> PrepareReport:
    report = PrepareReport()
    wanted = list(dict.fromkeys(images))
    with _progress(show_progress and bool(wanted)) as progress:
        task: TaskID | None = progress.add_task("", total=len(wanted)) if progress else None

        def say(text: str) -> None:
            if progress is not None and task is not None:
                progress.update(task, description=text[:100])

        for image in wanted:
            say(f"checking {image}")
            if has_image(api, image):
                report.present.append(image)
            elif not pull:
                report.missing[image] = "not in the local engine and pulling is off (pull='never')"
            else:
                say(f"pulling {image}")
                why = pull_image(api, image, lambda s, image=image: say(f"{image}: {s}"))
                if why is None:
                    report.pulled.append(image)
                else:
                    report.missing[image] = f"not in the local engine and the pull failed: {why}"
            if progress is not None and task is not None:
                progress.advance(task)
        say(
            f"{len(report.present)} present, {len(report.pulled)} pulled, "
            f"{len(report.missing)} missing"
        )
    return report
