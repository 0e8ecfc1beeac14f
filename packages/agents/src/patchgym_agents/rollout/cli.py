"""``python -m patchgym_agents.rollout``: run a policy over tasks, write JSONL + summary."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.console import Console

from patchgym_agents.envs_api import EnvConfig, Task, bundled_tasks, default_of, load_tasks
from patchgym_agents.policies import GoldPatchPolicy, OpenAIPolicy, Policy, Sampling
from patchgym_agents.rollout.config import RolloutConfig
from patchgym_agents.rollout.runner import rollout
from patchgym_agents.rollout.summary import print_summary


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m patchgym_agents.rollout",
        description=(
            "Run a policy over SWE tasks (N tasks x K samples, concurrently, on any sandbox "
            "backend); write trajectories.jsonl and summary.json to --out. Rerunning with the "
            "same --out resumes."
        ),
    )
    p.add_argument("--tasks", default="bundled", help="'bundled' or a JSONL/parquet/dataset path")
    p.add_argument("--format", default="auto", help="row format of --tasks (default: auto)")
    p.add_argument("--limit", type=int, default=None, help="first N tasks only")
    p.add_argument(
        "--policy",
        choices=["gold", "empty", "openai", "rules"],
        default="gold",
        help="rules: graph-planner's rule-based planner (no model)",
    )
    p.add_argument(
        "--scaffold",
        default=None,
        help="r2egym | sweagent | debug-gym | graph-planner (default: EnvConfig's)",
    )
    p.add_argument("--tool-format", choices=["text", "native"], default=None)
    p.add_argument("--sandbox", default='{"type": "local"}', help="backend config as JSON")
    p.add_argument("--samples", "-k", type=int, default=1)
    p.add_argument("--concurrency", "-c", type=int, default=None, help="default: RolloutConfig's")
    p.add_argument("--max-steps", type=int, default=None, help="default: EnvConfig's")
    p.add_argument("--episode-timeout", type=float, default=None, help="seconds per episode")
    p.add_argument("--step-timeout", type=float, default=None, help="seconds per tool command")
    p.add_argument(
        "--model-timeout",
        "--request-timeout",
        dest="model_timeout",
        type=float,
        default=None,
        help="seconds per model call (default: RolloutConfig's)",
    )
    p.add_argument("--infra-retries", type=int, default=2)
    p.add_argument("--max-context-tokens", type=int, default=None)
    p.add_argument("--out", type=Path, default=Path("rollouts"), help="output folder")
    p.add_argument("--no-resume", action="store_true", help="redo episodes already in --out")
    p.add_argument("--no-progress", action="store_true")
    g = p.add_argument_group("openai policy")
    g.add_argument("--model", default=None)
    g.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"))
    g.add_argument("--api-key-env", default="OPENAI_API_KEY", help="env var holding the key")
    g.add_argument("--temperature", type=float, default=None, help="default: Sampling's")
    g.add_argument("--top-p", type=float, default=None)
    g.add_argument("--max-tokens", type=int, default=None)
    g.add_argument("--retries", type=int, default=5)
    return p


def given(**settings: Any) -> dict[str, Any]:
    """The settings set on the command line (None: the configured default)."""
    return {k: v for k, v in settings.items() if v is not None}


def load(args: argparse.Namespace) -> list[Task]:
    if args.tasks == "bundled":
        tasks = bundled_tasks()
        return tasks[: args.limit] if args.limit else tasks
    return load_tasks(args.tasks, args.format, limit=args.limit).tasks


def make_policy(args: argparse.Namespace) -> Policy:
    if args.policy == "gold":
        return GoldPatchPolicy()
    if args.policy == "empty":
        return GoldPatchPolicy(empty=True)
    if args.policy == "rules":
        from patchgym_agents.graph_planner.policy import RulePlannerPolicy

        if (args.scaffold or default_of("scaffold")).replace("_", "-") != "graph-planner":
            raise SystemExit("--policy rules needs --scaffold graph-planner")
        return RulePlannerPolicy()
    if not args.model:
        raise SystemExit("--policy openai needs --model (and usually --base-url)")
    return OpenAIPolicy(
        args.model,
        base_url=args.base_url,
        api_key=os.environ.get(args.api_key_env),
        sampling=Sampling(
            **given(temperature=args.temperature), top_p=args.top_p, max_tokens=args.max_tokens
        ),
        model_timeout_s=args.model_timeout,
        max_retries=args.retries,
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        sandbox = json.loads(args.sandbox)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"--sandbox is not valid JSON ({exc.msg}): {args.sandbox!r}") from None
    limits = {
        "max_steps": args.max_steps,
        "episode_timeout_s": args.episode_timeout,
        "step_timeout_s": args.step_timeout,
    }
    try:
        env = EnvConfig(sandbox=sandbox, **given(scaffold=args.scaffold, **limits))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise SystemExit(f"invalid setting {where}: {err['msg']}") from None
    config = RolloutConfig(
        env=env,
        tool_format=args.tool_format,
        samples=args.samples,
        **given(concurrency=args.concurrency, model_timeout_s=args.model_timeout),
        infra_retries=args.infra_retries,
        max_context_tokens=args.max_context_tokens,
        output_dir=args.out,
        resume=not args.no_resume,
        progress=not args.no_progress,
    )
    tasks = load(args)
    policy = make_policy(args)

    async def go() -> int:
        try:
            summary = await rollout(tasks, policy, config)
        finally:
            await policy.aclose()
        print_summary(summary, Console())
        Console().print(f"wrote {config.output_dir / 'trajectories.jsonl'} and summary.json")
        return 0 if summary.finished == summary.episodes and not summary.leaked_sandboxes else 1

    try:
        return asyncio.run(go())
    except KeyboardInterrupt:
        print(
            f"interrupted; finished episodes are in {config.output_dir}; rerun to resume",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
