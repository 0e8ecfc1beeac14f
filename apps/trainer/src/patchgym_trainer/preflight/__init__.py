"""``patchgym preflight``: check a training config before GPUs are spent.

Each check is a row (pass / fail / warn / skip, what was seen, the fix). Pure rules live
in :mod:`.rules` (table-tested); checks that probe the machine in :mod:`.probes`.
"""

from __future__ import annotations

from patchgym_trainer.preflight import engines, gpu_memory, probes, rules
from patchgym_trainer.preflight.render import render
from patchgym_trainer.preflight.rules import Check
from patchgym_trainer.schema import AppConfig

__all__ = ["Check", "render", "run_preflight"]


async def run_preflight(cfg: AppConfig, *, check_images: bool = True) -> list[Check]:
    """Every check for ``cfg``; never raises for a problem it can describe."""
    train = cfg.train
    checks = [
        rules.token_budget(train),
        rules.batch_divisibility(train),
        rules.tensor_parallel(train),
    ]
    backend_cfg, backend_check = probes.backend_config(cfg.sandbox)
    backend_rows = probes.credentials(backend_cfg)
    checks += [backend_check, *backend_rows]
    train_report, train_check = probes.dataset("dataset", cfg.dataset)
    checks.append(train_check)
    val_rows: int | None = None
    if cfg.val_dataset is not None:
        val_report, val_check = probes.dataset("val_dataset", cfg.val_dataset)
        checks.append(val_check)
        val_rows = len(val_report.tasks) if val_report is not None else None
    checks.append(
        rules.sandbox_budget(
            train,
            cfg.sandbox,
            train_rows=len(train_report.tasks) if train_report is not None else None,
            val_rows=val_rows,
        )
    )
    if not check_images:
        checks.append(rules.Check(name="images", status="skip", detail="--no-images"))
    elif any(row.blocking for row in backend_rows):
        checks.append(
            rules.Check(
                name="images",
                status="skip",
                detail="needs credentials first",
                fix="see credentials",
            )
        )
    else:
        tasks = train_report.tasks if train_report is not None else []
        checks.append(await probes.images(backend_cfg, tasks))
    checks.append(probes.model(cfg.model))
    need_vllm = train.engine != "trl" and train.rollout_engine == "vllm"
    gpus, gpu_bytes = probes.gpus()
    installed = probes.installed_versions()
    checks.append(engines.versions(installed, train.engine, need_vllm=need_vllm, cuda=gpus > 0))
    checks.append(engines.gpu_row(train.engine, gpus, train.gpus_per_node))
    cache = gpu_memory.static_cache_check(
        train,
        probes.model_folder(cfg.model),
        gpu_bytes,
        reference=cfg.algorithm.use_kl_loss and cfg.algorithm.kl_coef > 0,
    )
    if cache is not None:
        checks.append(cache)
    return checks
