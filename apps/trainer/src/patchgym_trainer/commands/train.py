"""``patchgym train``: dispatch to the training engine (``train.engine``: verl by default, trl on CPU)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from patchgym_trainer.schema import AppConfig


def launch(cfg: AppConfig, out_dir: Path, console: Console, *, dry_run: bool = False) -> int:
    if cfg.train.engine == "trl":
        from patchgym_trainer.engines.trl import require_trl

        if dry_run:
            console.print(f"engine=trl: would train {cfg.model.path} with TRL GRPOTrainer")
            return 0
        require_trl()
        from patchgym_trainer.engines.trl.launch import launch as trl_launch

        return trl_launch(cfg, out_dir, console)
    from patchgym_trainer.engines.verl.launch import launch as verl_launch

    return verl_launch(cfg, out_dir, console, dry_run=dry_run)
