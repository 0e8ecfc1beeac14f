"""Preflight per ``train.engine``: what each needs, the line that installs it, the GPU row."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from patchgym_trainer.preflight import engines

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"
VERIFIED = dict(engines.PINS)
NOTHING = dict.fromkeys(engines.PINS)


def _extra_brings(extra: str) -> set[str]:
    """Package names an extra of patchgym-trainer pulls in, following its self-references."""
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    found: set[str] = set()
    for req in extras[extra]:
        name = req.split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip()
        if name == "patchgym-trainer":
            for sub in req.split("[")[1].rstrip("]").split(","):
                found |= _extra_brings(sub.strip())
        else:
            found.add(name)
    return found


@pytest.mark.parametrize("extra", sorted(engines.EXTRAS))
def test_each_extra_brings_what_the_rules_say(extra: str) -> None:
    assert engines.EXTRAS[extra] <= _extra_brings(extra), _extra_brings(extra)


@pytest.mark.parametrize(
    ("engine", "cuda"), [("verl", True), ("rllm", True), ("trl", True), ("trl", False)]
)
def test_every_missing_package_is_named_with_a_line_that_brings_it(
    engine: engines.Engine, cuda: bool
) -> None:
    row = engines.versions(NOTHING, engine, need_vllm=True, cuda=cuda)
    assert row.status == "fail"
    wanted = engines.needs(engine, need_vllm=True)
    assert all(name in row.detail for name in wanted)
    extra = engines.extra_for(engine, cuda=cuda)
    assert f"--extra {extra} " in row.fix
    assert set(wanted) <= engines.EXTRAS[extra]


def test_trl_does_not_ask_for_verl_or_its_pins() -> None:
    have = {**NOTHING, "trl": "1.16.0", "transformers": "5.17.0", "torch": "2.11.0+cu130"}
    row = engines.versions(have, "trl", need_vllm=False, cuda=True)
    assert row.status == "warn" and "verl" not in row.detail and "ray" not in row.detail
    assert "--extra gpu" in row.fix
    assert engines.versions(VERIFIED, "trl", need_vllm=False, cuda=False).status == "pass"
    row = engines.versions({**VERIFIED, "trl": None}, "trl", need_vllm=False, cuda=True)
    assert row.status == "fail" and "trl" in row.detail and "--extra gpu" in row.fix


@pytest.mark.parametrize(
    ("installed", "need_vllm", "status"),
    [
        (VERIFIED, True, "pass"),
        ({**VERIFIED, "torch": "2.13.0+cpu"}, True, "pass"),
        ({**VERIFIED, "vllm": None}, False, "pass"),
        ({**VERIFIED, "vllm": None}, True, "fail"),
        ({**VERIFIED, "transformers": "5.23.0"}, True, "fail"),
        (NOTHING, False, "fail"),
    ],
)
def test_verl_pins(installed: dict[str, str | None], need_vllm: bool, status: str) -> None:
    assert engines.versions(installed, "verl", need_vllm=need_vllm, cuda=True).status == status


def test_gpu_row_per_engine() -> None:
    assert engines.gpu_row("trl", 0, 8).status == "pass"
    assert "cuda" in engines.gpu_row("trl", 1, 8).detail
    assert "CPU" in engines.gpu_row("trl", 0, 8).detail
    assert engines.gpu_row("verl", 8, 8).status == "pass"
    assert engines.gpu_row("verl", 0, 1).status == "fail"
