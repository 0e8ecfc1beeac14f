"""The main job's fixed cost: ``patchgym --help`` and ``patchgym validate`` against baselines.

    uv run python bench/cli_startup.py              # 3 rounds
    uv run python bench/cli_startup.py --rounds 5 --uv

Every round runs each command once, interleaved, as separate processes (so a busy moment
hits all of them alike). Baselines, measured in the same run:

- ``python -c pass``: the interpreter's own start, the floor of any Python CLI;
- ``validate (fixed)``: ``patchgym validate validate.patches=[]``, the same command doing
  everything but the evaluations (imports, Hydra compose, backend, dataset, report), so
  ``validate`` minus it is the sandboxes' and tests' share.

A venv without bytecode (``uv sync`` without ``--compile-bytecode``, as uv does by default,
with ``PYTHONDONTWRITEBYTECODE`` set so Python never writes it) makes every command compile
its imports again; so do the workspace's own packages, which uv installs editable and never
compiles (``python -m compileall -q packages apps``, README): the bench says so before it
measures.

``--uv`` adds the same through ``uv run`` (what the README tells a newcomer to type) with
``uv run python -c pass`` as its floor. Targets (issue 28.4): ``validate`` <= 5 s on the 6
bundled tasks, ``--help`` <= 0.3 s. The load average (``uptime``) is printed before and
after: on a shared 2-core machine compare ratios, not wall seconds. ``CPU s`` is user +
system time of the command and the processes it waited for (load inflates it less than
wall time): for ``validate (fixed)`` it is close to the fixed cost on an idle machine;
the sandboxed test runs, reaped by the sandbox's own init, are mostly not in it. Not a
test: nothing fails.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall seconds, and CPU seconds (user + system) of the command and what it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, cpu


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def pyc_count() -> int:
    site = Path(sys.prefix) / "lib"
    return sum(1 for _ in site.rglob("*.pyc"))


def editable_roots() -> list[Path]:
    """The source folders the venv's ``.pth`` files add: the workspace's own packages,
    installed editable, whose bytecode ``uv sync --compile-bytecode`` does not write."""
    site = Path(sysconfig.get_paths()["purelib"])
    lines = (line.strip() for pth in site.glob("*.pth") for line in pth.read_text().splitlines())
    return sorted({Path(x) for x in lines if x.startswith("/") and Path(x).is_dir()})


def uncompiled(roots: list[Path]) -> int:
    """Modules under ``roots`` with no bytecode beside them (compiled at each import)."""
    tag = sys.implementation.cache_tag
    return sum(
        1
        for root in roots
        for py in root.rglob("*.py")
        if not (py.parent / "__pycache__" / f"{py.stem}.{tag}.pyc").is_file()
    )


def commands(out: Path, use_uv: bool) -> dict[str, list[str]]:
    py, pg = str(BIN / "python"), str(BIN / "patchgym")
    cmds = {
        "python -c pass": [py, "-c", "pass"],
        "patchgym --help": [pg, "--help"],
        "validate (fixed)": [pg, "validate", "validate.patches=[]", "--out", str(out / "f")],
        "validate": [pg, "validate", "--out", str(out / "v")],
    }
    if use_uv:
        cmds["uv run python -c pass"] = ["uv", "run", "python", "-c", "pass"]
        cmds["uv run patchgym --help"] = ["uv", "run", "patchgym", "--help"]
        cmds["uv run patchgym validate"] = ["uv", "run", "patchgym", "validate", "--out", str(out / "u")]  # fmt: skip
    return cmds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="at least 2")
    parser.add_argument("--uv", action="store_true", help="also through `uv run`")
    args = parser.parse_args()
    rounds = max(2, args.rounds)
    print(f"load before: {load()}")
    print(f"python {sys.version.split()[0]}, {pyc_count()} .pyc files under {sys.prefix}/lib")
    print(f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}")
    if missing := uncompiled([Path(sys.prefix) / "lib"]):
        print(
            f"WARNING: {missing} modules of the venv have no bytecode: every command compiles "
            "what it imports again, about 0.6 s CPU of each validate's start (the sandboxes' "
            "pytest is compiled by patchgym_envs.runnerbytecode). `uv sync --locked "
            "--compile-bytecode` (README) writes it once."
        )
    if missing := uncompiled(editable_roots()):
        print(
            f"WARNING: {missing} modules of the workspace's own packages have no bytecode "
            "(uv installs them editable and does not compile those): with "
            "PYTHONDONTWRITEBYTECODE set every command compiles the ones it imports, ~0.3 s "
            "of each validate's start. `uv run python -m compileall -q packages apps` "
            "(README) writes it once."
        )
    times: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="patchgym-bench-cli-") as tmp:
        cmds = commands(Path(tmp), args.uv)
        for r in range(rounds):
            for name, argv in cmds.items():
                wall, cpu = timed(argv)
                times.setdefault(name, []).append(wall)
                cpus.setdefault(name, []).append(cpu)
            print(
                f"round {r + 1}/{rounds}: "
                + ", ".join(f"{n} {v[-1]:.2f}s" for n, v in times.items())
            )
    print(f"load after:  {load()}")
    med = {n: statistics.median(v) for n, v in times.items()}
    floor, fixed = med["python -c pass"], med["validate (fixed)"]
    print(
        f"\n{'command':28} {'median s':>9} {'min s':>7} {'× python -c pass':>17} {'CPU s':>6}  note"
    )
    for name, values in times.items():
        base = med["uv run python -c pass"] if name.startswith("uv run") else floor
        note = ""
        if name == "validate":
            note = f"fixed cost {fixed:.2f}s = {fixed / med[name]:.0%} of it; target <= 5 s"
        elif name.endswith("--help"):
            note = "target <= 0.3 s"
        cpu = statistics.median(cpus[name])
        print(
            f"{name:28} {med[name]:9.2f} {min(values):7.2f} {med[name] / base:17.1f} "
            f"{cpu:6.2f}  {note}"
        )


if __name__ == "__main__":
    main()
