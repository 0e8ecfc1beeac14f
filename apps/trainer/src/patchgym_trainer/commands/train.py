"""``patchgym train``: dispatch to the training engine (``train.engine``: verl by default, trl on CPU).

Before the engine starts, the dataset's images pulled as-is are reduced to their base
commit, each once (:func:`prepare_run_images`), so no rollout worker derives them
during the first steps.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rich.console import Console

from patchgym_trainer.schema import AppConfig


async def prepare_run_images(cfg: AppConfig, console: Console) -> int:
    """Reduce the images pulled as-is of ``cfg.dataset`` on ``cfg.sandbox``; how many."""
    from patchgym_agents.rollout import prepare_images
    from patchgym_sandbox import create_backend
    from patchgym_trainer.datasets import load_dataset

    tasks = load_dataset(cfg.dataset).tasks
    backend = create_backend(cfg.sandbox)
    try:
        return await prepare_images(backend, cfg.env, tasks, console=console)
    finally:
        await backend.aclose()


def launch(cfg: AppConfig, out_dir: Path, console: Console, *, dry_run: bool = False) -> int:
    if cfg.train.engine == "trl":
        from patchgym_trainer.engines.trl import require_trl

        if dry_run:
            console.print(f"engine=trl: would train {cfg.model.path} with TRL GRPOTrainer")
            return 0
        require_trl()
        asyncio.run(prepare_run_images(cfg, console))
        from patchgym_trainer.engines.trl.launch import launch as trl_launch

        return trl_launch(cfg, out_dir, console)
    from patchgym_trainer.engines.verl.launch import launch as verl_launch

    if not dry_run and cfg.train.engine == "verl":
        from patchgym_trainer.engines.verl import require_verl

        require_verl()  # a missing engine is said before the images are prepared
        asyncio.run(prepare_run_images(cfg, console))
    return verl_launch(cfg, out_dir, console, dry_run=dry_run)
