"""Before the first episode: every image pulled as-is that a run uses, reduced once.

``patchgym rollout`` (the runner) and ``patchgym validate`` call :func:`prepare_images`
with the run's backend, so episodes find each derivation made (docker) or know to reduce
in each sandbox at start (k8s, e2b); a rich bar shows the images as they finish.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from patchgym_agents.envs_api import EnvConfig, Task
from patchgym_envs.cleanimages import Cleaned
from patchgym_sandbox import SandboxBackend


async def prepare_images(
    backend: SandboxBackend,
    env: EnvConfig,
    tasks: Sequence[Task],
    *,
    enabled: bool = True,
    console: Console | None = None,
) -> int:
    """Reduce the images of ``tasks`` (``env.clean_concurrency`` at once); returns how many.

    Raises ``ImageCleanInfraError`` / ``ImageCleanDataError`` naming every image that failed.
    """
    keys = env.images_to_clean(tasks, backend)
    if not keys:
        return 0
    progress = Progress(
        TextColumn("[bold]clean images"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[status]}"),
        console=console,
        disable=not enabled,
        transient=False,
    )
    failed = 0

    with progress:
        bar = progress.add_task(
            "clean", total=len(keys), status=f"{min(env.clean_concurrency, len(keys))} at once"
        )

        def done(c: Cleaned) -> None:
            nonlocal failed
            failed += c.error is not None
            name = c.key.image.rsplit("/", 1)[-1]
            how = "failed" if c.error else "derived" if c.derived else "reduced at each start"
            progress.update(bar, advance=1, status=f"failed {failed} · {name}: {how}")

        await env.prepare_images(keys, backend, on_done=done)
    return len(keys)
