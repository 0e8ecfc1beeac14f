"""What each ``train.engine`` needs installed, and the install line that brings it.

* ``verl`` (and ``rllm``, which trains through verl): verl, torch, transformers, ray, and
  vllm when it generates; exact pins (verl's ranges are narrow), GPU node only.
* ``trl``: trl, transformers, torch, on cuda or CPU; a version other than the locked one
  is a warning (TRL's GRPO step has run with others), a missing package a failure.

Every missing package is named with a ``uv sync`` line whose ``--extra`` exists in
``apps/trainer/pyproject.toml`` and brings it (:data:`EXTRAS`, checked against that file by
the tests).
"""

from __future__ import annotations

from typing import Literal

from patchgym_trainer.preflight.rules import Check

Engine = Literal["verl", "rllm", "trl"]

PINS: dict[str, str] = {
    "verl": "0.9.1",
    "torch": "2.13.0",
    "transformers": "5.10.4",
    "ray": "2.60.0",
    "vllm": "0.31.0",
    "trl": "1.16.0",
}
"""Versions verified together (see the trainer README)."""

EXTRAS: dict[str, frozenset[str]] = {
    "gpu": frozenset({"torch", "vllm", "verl", "transformers", "ray", "trl"}),
    "cpu": frozenset({"torch", "verl", "transformers", "ray", "trl"}),
}
"""The packages of :data:`PINS` each extra of ``patchgym-trainer`` brings."""


def needs(engine: Engine, *, need_vllm: bool) -> list[str]:
    if engine == "trl":
        return ["trl", "transformers", "torch"]
    return ["verl", "torch", "transformers", "ray", *(["vllm"] if need_vllm else [])]


def extra_for(engine: Engine, *, cuda: bool) -> str:
    """verl trains on GPU nodes only; trl takes the extra of the machine it is on."""
    return "gpu" if engine != "trl" or cuda else "cpu"


def install_line(engine: Engine, *, cuda: bool) -> str:
    return f"uv sync --package patchgym-trainer --extra {extra_for(engine, cuda=cuda)} --locked"


def versions(
    installed: dict[str, str | None], engine: Engine, *, need_vllm: bool, cuda: bool
) -> Check:
    """Every package ``engine`` needs: missing ones fail naming the line that brings them."""
    wanted = needs(engine, need_vllm=need_vllm)
    line = install_line(engine, cuda=cuda)
    missing = [n for n in wanted if installed.get(n) is None]
    wrong = [
        f"{n} {installed[n]} (want {PINS[n]})"
        for n in wanted
        if installed.get(n) is not None and str(installed[n]).split("+")[0] != PINS[n]
    ]
    shown = ", ".join(f"{n} {installed.get(n) or '-'}" for n in wanted)
    name = f"versions (engine={engine})"
    if missing:
        return Check(
            name=name,
            status="fail",
            detail=f"not installed: {', '.join(missing)} ({shown})",
            fix=f"{line}  # brings {', '.join(missing)}",
        )
    if wrong:
        strict = engine != "trl"
        return Check(
            name=name,
            status="fail" if strict else "warn",
            detail=f"{'mismatched' if strict else 'not the verified versions'}: {'; '.join(wrong)}",
            fix=line,
        )
    return Check(name=name, status="pass", detail=shown)


CPU_ONLY_FIX = (
    "on CPU: `patchgym train train.engine=trl preset=cpu_smoke` (TRL; its tiny model is "
    "built by `python -m patchgym_trainer.testing.tiny_model`)"
)
"""What a CPU-only machine can train with at all (the GPU row's fix there)."""


def gpu_row(engine: Engine, count: int, needed: int) -> Check:
    """verl needs ``needed`` GPUs per node; trl trains on cuda when one is visible, else CPU."""
    if engine == "trl":
        where = f"{count} CUDA GPU(s): trains on cuda" if count else "no CUDA GPU: trains on CPU"
        return Check(name="GPU", status="pass", detail=f"engine=trl, {where}")
    if count >= needed:
        return Check(name="GPU", status="pass", detail=f"{count} CUDA GPUs visible (need {needed})")
    return Check(
        name="GPU",
        status="fail",
        detail=f"{count} CUDA GPUs visible on this machine, need {needed} per node",
        fix=(f"{CPU_ONLY_FIX}, or " if count == 0 else "")
        + "run `patchgym train` on a GPU node (or lower train.gpus_per_node)",
    )
