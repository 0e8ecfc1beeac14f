"""Preflight rules as a table: config in, status (and the fix) out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from patchgym_sandbox.registry import load_config
from patchgym_trainer.compose import compose
from patchgym_trainer.preflight import rules
from patchgym_trainer.schema import TrainSettings


def train(**kw: Any) -> TrainSettings:
    return TrainSettings(**kw)


@pytest.mark.parametrize(
    ("settings", "status", "fix_has"),
    [
        (
            dict(
                max_prompt_length=4096, max_response_length=32768, ppo_max_token_len_per_gpu=40960
            ),
            "pass",
            "",
        ),
        (
            dict(
                max_prompt_length=4096, max_response_length=32768, ppo_max_token_len_per_gpu=36864
            ),
            "fail",
            "train.ppo_max_token_len_per_gpu=37888",
        ),
        (
            dict(max_prompt_length=1024, max_response_length=1024, ppo_max_token_len_per_gpu=1000),
            "fail",
            "ppo_max_token_len_per_gpu",
        ),
    ],
)
def test_token_budget(settings: dict[str, int], status: str, fix_has: str) -> None:
    check = rules.token_budget(train(**settings))
    assert check.status == status
    assert fix_has in check.fix


@pytest.mark.parametrize(
    ("batch", "n", "gpus", "nodes", "mini", "status"),
    [
        (4, 4, 8, 1, 4, "pass"),  # the AGS recipe: 16 sequences over 8 GPUs
        (4, 4, 8, 2, 4, "pass"),
        (3, 4, 8, 1, 3, "fail"),  # 12 over 8
        (2, 2, 1, 1, 2, "pass"),  # smoke
        (5, 3, 2, 1, 5, "fail"),
        (4, 4, 8, 1, 8, "fail"),  # mini batch larger than the batch
        (6, 4, 8, 1, 4, "fail"),  # 24/8 ok but 6 % 4 mini batches
    ],
)
def test_batch_divisibility(
    batch: int, n: int, gpus: int, nodes: int, mini: int, status: str
) -> None:
    check = rules.batch_divisibility(
        train(
            train_batch_size=batch,
            rollout_n=n,
            gpus_per_node=gpus,
            nodes=nodes,
            ppo_mini_batch_size=mini,
        )
    )
    assert check.status == status, check
    if status == "fail":
        assert check.fix


@pytest.mark.parametrize(
    ("rows", "epochs", "n", "limit", "status", "count"),
    [
        (500, 2, 4, 128, "pass", 4000),
        (6, 1, 2, None, "pass", 12),
        (100, 1, 64, 32, "fail", 6400),  # peak 4 × 64 = 256 > 32
        (None, 1, 4, 10, "skip", None),
    ],
)
def test_sandbox_budget(
    rows: int | None, epochs: int, n: int, limit: int | None, status: str, count: int | None
) -> None:
    sandbox: dict[str, Any] = {"type": "ags"}
    if limit is not None:
        sandbox["max_concurrency"] = limit
    check = rules.sandbox_budget(
        train(
            total_epochs=epochs,
            rollout_n=n,
            train_batch_size=4,
            ppo_mini_batch_size=4,
            expected_episode_s=360,
        ),
        load_config(sandbox),
        train_rows=rows,
        val_rows=None,
    )
    assert check.status == status, check
    if count is not None:
        assert f"= {count} sandboxes" in check.detail
        assert f"{count * 360 / 3600:,.1f} sandbox-hours" in check.detail


def test_sandbox_budget_counts_validation_passes() -> None:
    t = train(
        total_epochs=1,
        rollout_n=4,
        train_batch_size=4,
        ppo_mini_batch_size=4,
        test_freq=10,
        val_before_train=True,
    )
    check = rules.sandbox_budget(t, load_config({"type": "local"}), train_rows=400, val_rows=300)
    # 100 steps: validation before training and at steps 10, 20, ... 100 = 11 passes
    assert "+ 3300 validation" in check.detail


@pytest.mark.parametrize(("gpus", "tp", "status"), [(8, 2, "pass"), (8, 3, "fail"), (1, 1, "pass")])
def test_tensor_parallel(gpus: int, tp: int, status: str) -> None:
    assert (
        rules.tensor_parallel(train(gpus_per_node=gpus, tensor_model_parallel_size=tp)).status
        == status
    )


def test_backend_checks_come_from_the_backend(tmp_path: Any, monkeypatch: Any) -> None:
    from patchgym_trainer.preflight import probes

    monkeypatch.delenv("E2B_API_KEY", raising=False)
    local = probes.credentials(load_config({"type": "local"}))[0]
    assert local.status == "pass"
    (k8s,) = probes.credentials(load_config({"type": "k8s", "kubeconfig": str(tmp_path / "x")}))
    assert k8s.status == "fail" and "KUBECONFIG" in k8s.fix
    (ags,) = probes.credentials(load_config({"type": "ags"}))
    assert ags.status == "fail" and "E2B_API_KEY" in ags.fix
    (ok,) = probes.credentials(load_config({"type": "ags", "api_key": "k"}))
    assert ok.status == "pass"


async def test_images_probe_asks_the_backend_what_it_provisions_from(tmp_path: Any) -> None:
    """No backend names in preflight: the local backend answers with template folders."""
    from patchgym_envs import bundled_tasks
    from patchgym_trainer.preflight import probes

    local = load_config({"type": "local", "state_dir": str(tmp_path / "s")})
    tasks = bundled_tasks()[:2]
    ok = await probes.images(local, tasks)
    assert ok.status == "pass", ok.detail
    gone = [t.model_copy(update={"template": str(tmp_path / "nowhere")}) for t in tasks]
    bad = await probes.images(local, gone)
    assert bad.status == "fail" and "template folder not found" in bad.detail
    none = [t.model_copy(update={"template": None}) for t in tasks]
    assert (await probes.images(local, none)).status == "fail"


PRESETS = sorted(
    p.stem for p in (Path(rules.__file__).parents[1] / "conf" / "preset").glob("*.yaml")
)


@pytest.mark.parametrize("preset", PRESETS)
def test_every_shipped_preset_passes_the_config_rules(preset: str) -> None:
    """A preset that preflight blocks is a broken promise (``gpu_smoke`` once shipped a
    ``ppo_mini_batch_size`` larger than its batch and stopped at preflight on a real GPU)."""
    cfg = compose([f"preset={preset}", "model.path=/models/any"])
    for check in (rules.token_budget(cfg.train), rules.batch_divisibility(cfg.train),
                  rules.tensor_parallel(cfg.train)):  # fmt: skip
        assert check.status == "pass", (preset, check)
