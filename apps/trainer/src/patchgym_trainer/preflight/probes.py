"""Preflight checks that look at the machine: backend, credentials, images, model, data, GPU."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from patchgym_envs import ConversionReport, Task
from patchgym_envs.errors import DatasetError
from patchgym_envs.localbuild.hints import build_command
from patchgym_envs.sandboxes import spec_for
from patchgym_sandbox import BackendConfig, SandboxError, load_config
from patchgym_trainer.datasets import dataset_source, load_dataset
from patchgym_trainer.preflight.engines import PINS
from patchgym_trainer.preflight.rules import Check
from patchgym_trainer.schema import DatasetConfig, ModelConfig


def backend_config(sandbox: BackendConfig | dict[str, Any]) -> tuple[BackendConfig | None, Check]:
    try:
        cfg = load_config(sandbox)
    except SandboxError as exc:
        return None, Check(
            name="sandbox backend",
            status="fail",
            detail=str(exc),
            fix="fix the sandbox=... group or its keys",
        )
    return cfg, Check(name="sandbox backend", status="pass", detail=f"{cfg.type}: config valid")


def credentials(cfg: BackendConfig | None) -> list[Check]:
    """The backend's own checks of its config (credentials and the like)."""
    if cfg is None:
        return [Check(name="credentials", status="skip", detail="no valid sandbox config")]
    return [Check(**row.model_dump()) for row in cfg.checks()]


def hub_reachable(host: str = "huggingface.co", timeout_s: float = 3.0) -> bool:
    """A quick TCP probe, so an offline machine fails the check at once instead of after retries."""
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        return False
    try:
        with socket.create_connection((host, 443), timeout=timeout_s):
            return True
    except OSError:
        return False


def dataset(label: str, ds: DatasetConfig) -> tuple[ConversionReport | None, Check]:
    """Load with lenient conversion, so every bad row is counted, not just the first."""
    if ds.source not in ("bundled", "file") and not ds.path and not hub_reachable():
        return None, Check(
            name=label,
            status="fail",
            detail=f"{dataset_source(ds)}: the Hugging Face hub is not reachable from here",
            fix=f"{label}.path=<local copy: JSONL, parquet or save_to_disk folder> "
            f"(e.g. from `patchgym datasets convert` on a machine with hub access)",
        )
    try:
        report = load_dataset(ds.model_copy(update={"strict": False}))
    except Exception as exc:  # any reader failure is a failed check, not a crash
        return None, Check(
            name=label,
            status="fail",
            detail=f"{dataset_source(ds)}: {type(exc).__name__}: {str(exc)[:300]}",
            fix=f"point {label}.path at a local copy (JSONL, parquet or save_to_disk folder)"
            if ds.source not in ("bundled", "file")
            else f"check {label}.path and {label}.format",
        )
    if report.skipped:
        first = report.skipped[0]
        return report, Check(
            name=label,
            status="fail",
            detail=f"{len(report.tasks)} tasks, {len(report.skipped)} bad rows (first: row {first.index}, id {first.id!r}, field {first.field!r}: {first.reason})",
            fix="`patchgym datasets convert ... dataset.strict=false` drops them and writes a clean file",
        )
    images = len({t.image or t.template for t in report.tasks})
    return report, Check(
        name=label,
        status="pass",
        detail=f"{len(report.tasks)} tasks converted ({', '.join(f'{k}: {v}' for k, v in report.formats.items())}), {images} images",
    )


async def images(cfg: BackendConfig | None, tasks: list[Task], *, timeout_s: float = 600) -> Check:
    """Ask the backend to make every task image available (``backend.prepare``)."""
    if cfg is None or not tasks:
        return Check(name="images", status="skip", detail="no backend or no tasks")
    try:
        backend = cfg.build()
    except Exception as exc:
        return Check(
            name="images",
            status="fail",
            detail=f"cannot build the {cfg.type} backend: {exc}",
            fix="install the backend package and start its engine",
        )
    try:
        wanted = [backend.provisioned_from(spec_for(t, backend)) for t in tasks]
    except DatasetError as exc:  # a row path outside the data roots, or missing
        return Check(
            name="images", status="fail", detail=str(exc), fix="rebuild or fix the dataset"
        )
    if not all(wanted):
        return Check(
            name="images",
            status="fail",
            detail=f"{sum(not w for w in wanted)} tasks name nothing the {cfg.type} backend "
            "can provision from (an image, or a template folder for the local backend)",
            fix="pick the sandbox backend the dataset was built for; SWE-bench rows: "
            + build_command(cfg.type),
        )
    refs = sorted({w for w in wanted if w})
    try:
        report = await asyncio.wait_for(backend.prepare(refs), timeout_s)
    except Exception as exc:
        return Check(
            name="images",
            status="fail",
            detail=f"prepare({len(refs)} images) on {cfg.type} failed: {type(exc).__name__}: {str(exc)[:300]}",
            fix="check the engine / credentials, then rerun preflight",
        )
    finally:
        try:
            await backend.aclose()
        except Exception:  # closing a client must not hide the check's result
            pass
    if report.missing:
        first = next(iter(report.missing.items()))
        return Check(
            name="images",
            status="fail",
            detail=f"{len(report.missing)}/{len(refs)} images unavailable (first: {first[0]}: {first[1]})",
            fix="build or push the images, or let the backend pull them (sandbox.pull=missing); "
            "SWE-bench rows offline: " + build_command(cfg.type),
        )
    return Check(
        name="images",
        status="pass",
        detail=f"{len(report.present)} present, {len(report.pulled)} pulled",
    )


def hf_cache_dirs() -> list[Path]:
    roots = []
    if os.environ.get("HF_HUB_CACHE"):
        roots.append(Path(os.environ["HF_HUB_CACHE"]))
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    roots.append(home / "hub")
    return roots


def is_hub_id(path: str) -> bool:
    """``owner/name``: a Hugging Face hub id, not a path."""
    return path.count("/") == 1 and not path.startswith(("/", "."))


def model_folder(model_cfg: ModelConfig) -> Path | None:
    """The model's folder: ``model.path`` itself, or its snapshot in the Hugging Face cache
    (a hub id: the one ``refs/main`` names, else the first there); None when neither holds
    a ``config.json``."""
    path = Path(model_cfg.path).expanduser()
    if path.is_dir():
        return path if (path / "config.json").is_file() else None
    if is_hub_id(model_cfg.path):
        folder = "models--" + model_cfg.path.replace("/", "--")
        for root in hf_cache_dirs():
            snapshots = root / folder / "snapshots"
            try:  # the snapshot the hub's main branch resolves to, as transformers loads it
                main = snapshots / (root / folder / "refs" / "main").read_text().strip()
            except OSError:
                main = None
            if main is not None and (main / "config.json").is_file():
                return main
            for config in sorted(snapshots.glob("*/config.json")):
                return config.parent
    return None


def model(model_cfg: ModelConfig) -> Check:
    path = Path(model_cfg.path).expanduser()
    found = model_folder(model_cfg)
    if path.is_dir():
        if found is not None:
            return Check(name="model", status="pass", detail=f"{path} (config.json readable)")
        return Check(
            name="model",
            status="fail",
            detail=f"{path} has no config.json",
            fix="point model.path at a Hugging Face model folder",
        )
    if is_hub_id(model_cfg.path):
        if found is not None:
            return Check(
                name="model", status="pass", detail=f"{model_cfg.path} in {found.parent.parent}"
            )
        return Check(
            name="model",
            status="fail",
            detail=f"{model_cfg.path} is not in the Hugging Face cache ({', '.join(map(str, hf_cache_dirs()))})",
            fix=f"huggingface-cli download {model_cfg.path}  (or model=local model.path=<folder>)",
        )
    return Check(
        name="model",
        status="fail",
        detail=f"{model_cfg.path} does not exist",
        fix="model.path=<local folder or hub id>",
    )


def installed_versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in PINS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def gpus() -> tuple[int, int | None]:
    """CUDA GPUs visible here and the first one's memory in bytes (None without one or when
    it does not say): torch if installed, else ``nvidia-smi``, one line per GPU."""
    try:
        import torch

        if torch.cuda.is_available():
            first = torch.cuda.get_device_properties(0).total_memory
            return int(torch.cuda.device_count()), int(first)
    except ImportError:
        pass
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0, None
    query = [smi, "--query-gpu=memory.total", "--format=csv,noheader,nounits"]
    try:
        out = subprocess.run(query, capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0, None
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    first_mib = lines[0] if lines else ""
    return len(lines), (int(first_mib) << 20 if first_mib.isdigit() else None)
