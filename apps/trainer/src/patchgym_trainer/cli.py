"""The ``patchgym`` command line (typer). Every command takes Hydra overrides as arguments:

    patchgym validate                                   # bundled tasks on the local backend
    patchgym validate sandbox=docker dataset=file dataset.path=tasks.jsonl
    patchgym preflight preset=ags_swebench
    patchgym train preset=smoke
    patchgym datasets convert dataset=swe_bench_lite dataset.path=lite.parquet

Errors the app can describe (bad config, bad data, missing engine) are printed as one
line without a traceback, with the exit codes of :mod:`patchgym_trainer.failures`; a run
whose result is bad (a task misbehaves, preflight fails) exits with status 1. Only a bug
prints a traceback (exit 70); ``--debug`` anywhere on the line prints it for every error.

Only typer is imported up front: each command imports what it needs (Hydra, rich, the
sandbox and env packages) when it runs, so ``patchgym --help`` starts in a fraction of the
time a command takes.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast

import typer

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from rich.console import Console

    from patchgym_trainer.schema import AppConfig

app = typer.Typer(
    name="patchgym",
    help="Train and evaluate SWE agents: validate datasets, roll out policies, preflight and train.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # click's plain help: no rich import, no padding, fits when piped
)


@app.callback()
def _options(
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", help="print the traceback of every error (allowed anywhere on the line)"
        ),
    ] = False,
) -> None:
    """Train and evaluate SWE agents: validate datasets, roll out policies, preflight and train.

    Every command takes Hydra overrides (group=option, key=value); `patchgym config` prints them.
    """
    # main() takes --debug off the line before typer parses it; this option documents it.


datasets_app = typer.Typer(
    help="Convert, register and inspect datasets.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(datasets_app, name="datasets")
sandboxes_app = typer.Typer(
    help="List and reap patchgym sandboxes on a backend.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(sandboxes_app, name="sandboxes")

T = TypeVar("T")


def _run(coro: Coroutine[Any, Any, T]) -> T:
    import asyncio

    return asyncio.run(coro)


_consoles: dict[bool, Console] = {}


def _console(stderr: bool = False) -> Console:
    if stderr not in _consoles:
        from rich.console import Console

        _consoles[stderr] = Console(stderr=stderr)
    return _consoles[stderr]


Overrides = Annotated[
    list[str] | None,
    typer.Argument(
        help="Hydra overrides: group=option (sandbox=docker) or key=value (dataset.path=x)"
    ),
]
OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="output folder (default: <run.output_dir>/<run id>, e.g. validate-<time>-<hex>)",
    ),
]


def new_run_id(command: str) -> str:
    """``<command>-<local time>-<4 hex>``: sortable, and unique among runs started together."""
    import uuid

    return f"{command}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"


def _run_dir(cfg: AppConfig, command: str, out: Path | None) -> tuple[Path, str]:
    """The output folder and the run id: one name for both unless ``--out`` names the folder."""
    run_id = new_run_id(command)
    return (out if out is not None else Path(cfg.run.output_dir) / run_id), run_id


@app.command(short_help="Gold patch must resolve every task, empty patch must not.")
def validate(overrides: Overrides = None, out: OutOpt = None) -> None:
    """Gold patch must resolve every task, empty patch must not (default: bundled tasks, local)."""
    from patchgym_trainer.commands.validate import run_validate
    from patchgym_trainer.compose import compose

    console = _console()
    cfg = compose(overrides or [])
    out_dir, run_id = _run_dir(cfg, "validate", out)
    summary = _run(run_validate(cfg, out_dir, console, run_id=run_id))
    if summary.passed:
        console.print(f"[green]all {summary.tasks} tasks behave[/] in {summary.wall_s:.1f}s")
        return
    if summary.misbehaving:
        console.print(f"[bold red]misbehaving tasks: {', '.join(summary.misbehaving)}[/]")
    if summary.infra:
        console.print(f"[yellow]infrastructure errors: {', '.join(summary.infra)}[/]")
    raise typer.Exit(1)


@app.command(short_help="Roll out a policy over a dataset (K samples per task).")
def rollout(overrides: Overrides = None, out: OutOpt = None) -> None:
    """Run a policy behind an OpenAI-compatible endpoint over a dataset (K samples per task)."""
    from patchgym_trainer.commands.rollout import run_rollout
    from patchgym_trainer.compose import compose

    cfg = compose(overrides or [])
    out_dir, run_id = _run_dir(cfg, "rollout", out)
    # --out names a folder a later run may resume: its run id then derives from the folder
    summary = _run(run_rollout(cfg, out_dir, _console(), run_id=None if out else run_id))
    if summary.episodes and summary.infra_failed == summary.episodes:
        raise typer.Exit(1)


@app.command(short_help="Check a training config before GPUs are spent.")
def preflight(
    overrides: Overrides = None,
    images: Annotated[bool, typer.Option(help="ask the backend to prepare every image")] = True,
) -> None:
    """Check a training config before GPUs are spent (table of checks with the fix)."""
    from patchgym_trainer.compose import compose
    from patchgym_trainer.preflight import render, run_preflight

    cfg = compose(overrides or [])
    checks = _run(run_preflight(cfg, check_images=images))
    render(checks, _console(), title=f"preflight — {cfg.run.name}")
    if any(c.blocking for c in checks):
        raise typer.Exit(1)


@app.command(short_help="Preflight, then train (verl, rLLM or TRL).")
def train(
    overrides: Overrides = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="print the verl command instead of running it")
    ] = False,
    skip_preflight: Annotated[bool, typer.Option("--skip-preflight")] = False,
) -> None:
    """Preflight, then launch verl PPO/GRPO/RLOO with the patchgym agent loop."""
    from patchgym_trainer.commands.train import launch
    from patchgym_trainer.compose import compose
    from patchgym_trainer.preflight import render, run_preflight

    console = _console()
    cfg = compose(overrides or [])
    if not skip_preflight:
        checks = _run(run_preflight(cfg))
        render(checks, console, title=f"preflight — {cfg.run.name}")
        blocking = [c for c in checks if c.blocking]
        if blocking and not dry_run:
            console.print(
                "[bold red]train stopped at preflight:[/] "
                + "; ".join(f"{c.name}: {c.fix or c.detail}" for c in blocking),
                soft_wrap=True,
            )
            raise typer.Exit(1)
    code = launch(cfg, _run_dir(cfg, "train", None)[0], console, dry_run=dry_run)
    if code:
        raise typer.Exit(code)


@app.command("config", short_help="Print the composed config and every group's choices.")
def show_config(overrides: Overrides = None) -> None:
    """Print the config in effect (after overrides and defaults) and every group's choices."""
    from omegaconf import OmegaConf

    from patchgym_trainer.compose import GROUPS, compose, group_options

    console = _console()
    cfg = compose(overrides or [])
    data = cfg.model_dump(mode="json", by_alias=True, exclude={"env": {"sandbox", "scaffold"}})
    # plain lines: no padding to the terminal's width, nothing wrapped (copyable, diffable)
    console.print(
        OmegaConf.to_yaml(OmegaConf.create(data)).rstrip("\n"),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    for group in GROUPS:
        console.print(f"[bold]{group}[/]: {', '.join(group_options(group))}", soft_wrap=True)


@datasets_app.command("convert", short_help="Convert the dataset to verl/rLLM parquet or JSONL.")
def datasets_convert(
    overrides: Overrides = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="file ending in .parquet (verl/rLLM) or .jsonl")
    ] = None,
) -> None:
    """Convert the configured dataset to verl/rLLM parquet or JSONL tasks."""
    from patchgym_trainer.commands.datasets import convert
    from patchgym_trainer.compose import compose

    cfg = compose(overrides or [])
    target = (
        out
        or Path(cfg.run.output_dir) / "datasets" / f"{cfg.dataset.name}_{cfg.dataset.split}.parquet"
    )
    convert(cfg, target, _console())


@datasets_app.command("register", short_help="Write the dataset into the rLLM registry.")
def datasets_register(
    name: Annotated[str, typer.Argument(help="registry name (rLLM DatasetRegistry layout)")],
    overrides: Overrides = None,
    rllm_version: Annotated[
        str, typer.Option(help="registry layouts to write: current, v0.2 or both")
    ] = "both",
) -> None:
    """Write the dataset under $RLLM_HOME (or ~/.rllm)/datasets/<name>/<split>.parquet (+ _verl)."""
    from patchgym_trainer.commands.datasets import RLLMVersion, register
    from patchgym_trainer.compose import compose

    cfg = compose(overrides or [])
    register(cfg, name, _console(), cast("RLLMVersion", rllm_version))


@datasets_app.command(
    "build-local", short_help="Build rows as local tasks (repo + uv env, no Docker)."
)
def datasets_build_local(
    overrides: Overrides = None,
    out: Annotated[
        Path, typer.Option("--out", help="templates, tasks.jsonl and report go here")
    ] = Path("patchgym-local"),
    mirror: Annotated[
        list[str] | None,
        typer.Option("--mirror", help="owner/name=git URL or local path (repeatable)"),
    ] = None,
    specs: Annotated[
        Path | None, typer.Option("--specs", help="JSON/YAML install specs laid over the harness's")
    ] = None,
    python: Annotated[
        str | None, typer.Option("--python", help="build every env with this Python (e.g. 3.11)")
    ] = None,
    cache_dir: Annotated[
        Path | None,
        typer.Option("--cache-dir", help="mirrors and envs (default ~/.cache/patchgym)"),
    ] = None,
    probe: Annotated[
        bool,
        typer.Option(
            "--probe/--no-probe",
            help="parity gate: run gold and empty once per row; drop network-bound tests",
        ),
    ] = True,
    target: Annotated[
        str,
        typer.Option(
            "--for",
            help="local (templates + envs), docker (also an offline image per row), or k8s "
            "(and load each image into the cluster node's runtime)",
        ),
    ] = "local",
    node_runtime: Annotated[
        str,
        typer.Option(
            "--node-runtime",
            help="--for k8s: the kubelet's runtime: containerd (ctr import) or docker (nothing "
            "to load: the project's single-node cluster)",
        ),
    ] = "containerd",
    allow_drop: Annotated[
        int, typer.Option("--allow-drop", help="most network-bound tests one row may lose")
    ] = 3,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            help="resolve unpinned requirements as of this date for every row "
            "(default: each row's created_at; 'none': today)",
        ),
    ] = None,
) -> None:
    """Build the dataset's rows as local tasks: repo at base commit + a uv env, no Docker."""
    from patchgym_envs.localbuild import LocalBuildConfig
    from patchgym_trainer.commands.build_local import build_local, parse_mirrors
    from patchgym_trainer.compose import compose

    if target not in ("local", "docker", "k8s"):
        from patchgym_trainer.errors import ConfigError

        raise ConfigError(f"--for {target!r}: expected local, docker or k8s")
    if node_runtime not in ("containerd", "docker"):
        from patchgym_trainer.errors import ConfigError

        raise ConfigError(f"--node-runtime {node_runtime!r}: expected containerd or docker")
    cfg = compose(overrides or [])
    fields: dict[str, object] = {
        "out": out,
        "mirrors": parse_mirrors(mirror or []),
        "specs": specs,
        "allow_drop": allow_drop,
        "as_of": as_of,
        "target": target,
        "node_runtime": node_runtime,
    }
    if python:
        fields["python"] = python
    if cache_dir:
        fields["cache_dir"] = cache_dir
    report = build_local(cfg, LocalBuildConfig.model_validate(fields), _console(), probe=probe)
    if not report.built:
        raise typer.Exit(1)


@datasets_app.command("info", short_help="List registered datasets, or show one.")
def datasets_info(
    name: Annotated[str | None, typer.Argument(help="registered name; omit to list")] = None,
) -> None:
    """List registered datasets, or show one (splits, rows, images, formats)."""
    from patchgym_trainer.commands.datasets import info

    info(name, _console())


@sandboxes_app.command("list", short_help="Every patchgym sandbox on the configured backend.")
def sandboxes_list(overrides: Overrides = None) -> None:
    """Every patchgym sandbox on the configured backend: id, run, rollout, owner, age, lease."""
    from patchgym_trainer.commands.sandboxes import list_sandboxes
    from patchgym_trainer.compose import compose

    cfg = compose(overrides or [])
    _run(list_sandboxes(cfg, _console()))


@sandboxes_app.command(
    "reap", short_help="Remove leftovers: --run ID, --expired or --all-mine (or --images)."
)
def sandboxes_reap(
    overrides: Overrides = None,
    run: Annotated[str | None, typer.Option("--run", help="the sandboxes of one run id")] = None,
    expired: Annotated[bool, typer.Option("--expired", help="every expired lease")] = False,
    all_mine: Annotated[
        bool, typer.Option("--all-mine", help="everything this user made from this host")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show, remove nothing")] = False,
    images: Annotated[
        bool,
        typer.Option(
            "--images",
            help="derived images instead: those no longer current (source re-pulled, script "
            "changed), never one in use",
        ),
    ] = False,
    older_than: Annotated[
        str | None,
        typer.Option("--older-than", help="with --images: also those older than this (7d, 12h)"),
    ] = None,
) -> None:
    """Remove leftovers (one of --run ID, --expired, --all-mine), or with --images the
    derived images no longer current; --dry-run lists them."""
    from patchgym_trainer.commands.sandboxes import Selection, parse_age, reap, reap_images
    from patchgym_trainer.compose import compose
    from patchgym_trainer.errors import ConfigError

    if images:
        if run is not None or expired or all_mine:
            raise ConfigError("sandboxes reap --images takes no --run, --expired or --all-mine")
        age = parse_age(older_than) if older_than is not None else None
        cfg = compose(overrides or [])
        _run(reap_images(cfg, _console(), older_than_s=age, dry_run=dry_run))
        return
    if older_than is not None:
        raise ConfigError("--older-than selects derived images: use it with --images")
    selection = Selection.from_flags(run, expired, all_mine)
    cfg = compose(overrides or [])
    _run(reap(cfg, selection, _console(), dry_run=dry_run))


class _Flag:
    def __init__(self) -> None:
        self.set = False

    def __bool__(self) -> bool:
        return self.set


def _sigterm_as_interrupt() -> _Flag:
    """SIGTERM unwinds like Ctrl-C: asyncio cancels the command, every sandbox is closed
    and the run's leftovers reaped in ``finally`` blocks, then the exit status is 143."""
    import signal
    import threading

    flag = _Flag()
    if threading.current_thread() is not threading.main_thread():
        return flag

    def on_term(signum: int, frame: object) -> None:
        flag.set = True
        signal.raise_signal(signal.SIGINT)

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # Started with SIGINT ignored (`nohup ... &`, CI runners): SIGTERM goes through it.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, on_term)
    return flag


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: expected errors become one line and an exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    args = [a for a in args if a != "--debug"]
    terminated = _sigterm_as_interrupt()
    try:
        code = app(args=args, standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        from patchgym_trainer import failures

        _console(stderr=True).print("terminated" if terminated else "interrupted")
        sys.exit(failures.SIGTERM_EXIT if terminated else failures.SIGINT_EXIT)
    except Exception as exc:
        # Usage errors: typer >= 0.20 raises its vendored click's exceptions, older ones click's;
        # both have show() and exit_code, so no click import is needed (and none may exist).
        show, exit_code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(exit_code, int):
            show()
            sys.exit(exit_code)
        if type(exc).__name__ == "Abort":
            sys.exit(1)
        from rich.markup import escape

        from patchgym_envs.errors import one_line
        from patchgym_trainer import failures

        err_console = _console(stderr=True)
        failure = failures.classify(exc)
        if debug or failure is None:
            import traceback

            traceback.print_exc()
        if failure is None:
            err_console.print(
                f"[bold red]internal error (a bug, please report it):[/] "
                f"{escape(type(exc).__name__)}: {escape(one_line(str(exc)))}",
                highlight=False,
            )
            sys.exit(failures.BUG)
        err_console.print(
            f"[bold red]{failure.kind}:[/] {escape(failure.message)}",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(failure.code)
    if terminated or code == 130:  # typer turns KeyboardInterrupt into 130
        _console(stderr=True).print("terminated" if terminated else "interrupted")
        sys.exit(143 if terminated else 130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
