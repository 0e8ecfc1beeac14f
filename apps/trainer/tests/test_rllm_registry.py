"""``patchgym datasets register`` writes both rLLM registry layouts; ``train_v02`` names a miss."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from rich.console import Console

from patchgym_trainer.commands import datasets as dataset_commands
from patchgym_trainer.compose import compose
from patchgym_trainer.errors import TrainerError


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RLLM_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def fake_rllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in ``rllm`` package folder (never imported: only located), found first
    even when a real rLLM was imported earlier in this process."""
    pkg = tmp_path / "site" / "rllm"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('must not be imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name in [m for m in sys.modules if m.split(".")[0] == "rllm"]:
        monkeypatch.delitem(sys.modules, name)
    return pkg


def test_both_layouts(home: Path, fake_rllm: Path) -> None:
    cfg = compose(["dataset.limit=2"])
    folder = dataset_commands.register(cfg, "Tiny", Console(quiet=True))
    split = cfg.dataset.split
    current = json.loads((home / "datasets" / "registry.json").read_text())
    assert current["version"] == 2
    assert current["datasets"]["Tiny"]["splits"][split]["num_examples"] == 2
    legacy = json.loads((fake_rllm / "registry" / "dataset_registry.json").read_text())
    path = Path(legacy["Tiny"][split])
    assert path.is_absolute() and path == (folder / f"{split}.parquet").resolve()
    assert Path(str(path).replace(".parquet", "_verl.parquet")).is_file()


def test_current_only_and_v02_without_rllm(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dataset_commands, "legacy_registry_file", lambda: None)
    cfg = compose(["dataset.limit=1"])
    dataset_commands.register(cfg, "One", Console(quiet=True))  # both: v0.2 skipped
    assert (home / "datasets" / "registry.json").is_file()
    with pytest.raises(TrainerError, match="no `rllm` package is importable"):
        dataset_commands.register(cfg, "One", Console(quiet=True), "v0.2")
    with pytest.raises(TrainerError, match=r"allowed: current, v0\.2, both"):
        dataset_commands.register(cfg, "One", Console(quiet=True), "v3")  # type: ignore[arg-type]


def test_train_v02_names_a_missing_dataset() -> None:
    from patchgym_trainer.engines.rllm.train_v02 import load_registered

    class Registry:
        @staticmethod
        def load_dataset(name: str, split: str) -> None:
            return None

    with pytest.raises(TrainerError, match=r"no dataset 'R2E_Gym_Subset' split 'train'.*register"):
        load_registered(Registry, "R2E_Gym_Subset", "train")
