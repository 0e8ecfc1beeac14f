"""A real RL training step on CPU through our environment: `patchgym train preset=cpu_smoke`.

1. build a random-weight Qwen2 with a byte-level BPE tokenizer trained here
   (``patchgym_trainer.testing.tiny_model``; nothing downloaded);
2. run the CLI as a user would: ``patchgym train preset=cpu_smoke`` (TRL's GRPOTrainer,
   engine=trl) on two bundled tasks in local sandboxes under a private state folder;
3. check what a training step must show, from the run's ``train_summary.json`` and
   independently of it:
   - rewards come from graded episodes: every sample graded (no infra error), at least
     one 1 (the gold-forced sample) and one 0 (the model's), reward 1 exactly when the
     verdict says resolved;
   - at least one optimiser step with a finite loss;
   - parameters changed: the saved checkpoint differs from the starting weights;
   - the checkpoint reloads (model and tokenizer) and its forward pass is finite;
   - sandboxes all closed: the backend lists none of the run's, and the private state
     folder holds no sandbox.

    python apps/trainer/scripts/train_cpu.py [--out DIR]
    python apps/trainer/scripts/train_cpu.py --preset gpu_smoke --expect-device cuda   # a GPU node
    python apps/trainer/scripts/train_cpu.py --preset gpu_smoke train.static_cache=true  # + overrides
    python apps/trainer/scripts/train_cpu.py --preset gpu_qwen05b --shape qwen2.5-0.5b \
        --expect-device cuda train.force_gold_samples=1   # the real preset, a random model

On a GPU node the same checks run on ``preset=gpu_smoke`` (six tasks x four samples,
episodes concurrent, generation batched, bf16 where supported); ``--expect-device`` also
fails the run when the summary's ``device`` (where the policy trained) is another.

Prints a timing line per phase; exits non-zero (with the failed check) on failure.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def check(ok: bool, what: str) -> None:
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        raise SystemExit(f"train_cpu: {what}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--preset", default="cpu_smoke", help="cpu_smoke (CI) or gpu_smoke")
    ap.add_argument("--expect-device", default=None, help="cpu or cuda: where it must train")
    ap.add_argument(
        "--shape",
        default="tiny",
        help="the random model's shape (tiny_model.SHAPES: tiny, qwen2.5-0.5b)",
    )
    ap.add_argument(
        "overrides",
        nargs="*",
        help="more Hydra overrides for `patchgym train` (train.static_cache=true)",
    )
    args = ap.parse_args()
    out = (args.out or Path(tempfile.mkdtemp(prefix="patchgym-train-cpu-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()

    from patchgym_trainer.testing.tiny_model import build_tiny_model

    model_dir = build_tiny_model(out / "tiny-qwen", shape=args.shape)
    print(f"[{time.monotonic() - t0:6.1f}s] tiny model built at {model_dir}", flush=True)

    state_dir = out / "sandboxes"
    runs = out / "runs"
    cmd = [
        sys.executable, "-m", "patchgym_trainer", "train", f"preset={args.preset}",
        f"model.path={model_dir}", f"run.output_dir={runs}", f"+sandbox.state_dir={state_dir}",
        *args.overrides,
    ]  # fmt: skip
    t1 = time.monotonic()
    env = {"TRL_EXPERIMENTAL_SILENCE": "1"}
    code = subprocess.call(cmd, timeout=args.timeout, env={**os.environ, **env})
    print(f"[{time.monotonic() - t0:6.1f}s] patchgym train exited {code} after "
          f"{time.monotonic() - t1:.1f}s", flush=True)  # fmt: skip
    check(code == 0, f"`patchgym train preset={args.preset}` exited 0 (got {code})")

    summaries = sorted(runs.glob("train-*/train_summary.json"))
    check(len(summaries) == 1, f"one train_summary.json under {runs} (found {len(summaries)})")
    verify(summaries[0].parent, model_dir, state_dir, args.expect_device)
    print(f"[{time.monotonic() - t0:6.1f}s] train_cpu ({args.preset}) passed", flush=True)
    return 0


def verify(run_dir: Path, model_dir: Path, state_dir: Path, device: str | None) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from patchgym_trainer.engines.trl.launch import leftover_sandboxes, read_summary

    s = read_summary(run_dir)
    print(f"      summary: steps={s.steps} losses={s.losses} rewards={s.rewards} "
          f"resolved={s.resolved} forced_gold={s.forced_gold} wall={s.wall_s}s "
          f"device={s.device} dtype={s.dtype}", flush=True)  # fmt: skip
    if device is not None:
        check(s.device.split(":")[0] == device, f"trained on {device} (summary: {s.device})")
    check(not s.infra_errors, f"every episode graded, no infra error ({s.infra_errors})")
    check(all(r is not None for r in s.rewards), "every sample has a reward from its verdict")
    check(1.0 in s.rewards and 0.0 in s.rewards, f"rewards hold a 1 and a 0 ({s.rewards})")
    check(
        all((r == 1.0) == res for r, res in zip(s.rewards, s.resolved, strict=True)),
        "reward is 1 exactly when the verdict says resolved",
    )
    check(
        all(res for res, g in zip(s.resolved, s.forced_gold, strict=True) if g),
        "every gold-forced episode resolved",
    )
    check(s.steps >= 1, f"at least one optimiser step ({s.steps})")
    check(
        bool(s.hack) and all(0.0 <= row["hack/any"] <= 1.0 for row in s.hack),
        f"hack-flag rates logged per step ({s.hack})",
    )
    check(bool(s.losses) and all(math.isfinite(x) for x in s.losses), f"finite loss ({s.losses})")
    check(s.param_delta > 0, f"parameters moved during training (max |Δ| {s.param_delta:.3g})")

    ckpt = Path(s.checkpoint)
    start = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    trained = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(ckpt)
    before = dict(start.named_parameters())
    moved = max(
        float((p.detach() - before[n].detach()).abs().max()) for n, p in trained.named_parameters()
    )
    check(
        moved > 0, f"the reloaded checkpoint differs from the start weights (max |Δ| {moved:.3g})"
    )
    ids = tok("<|im_start|>user\nfix the bug<|im_end|>\n", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = trained(ids).logits
    check(bool(torch.isfinite(logits).all()), "the reloaded checkpoint's forward pass is finite")

    sandbox = {"type": "local", "state_dir": str(state_dir)}
    left = leftover_sandboxes(sandbox, s.run_id)
    check(not s.leftover_sandboxes and not left, f"no sandbox of the run left ({left})")
    records = list(state_dir.glob("*/record.json"))
    check(not records, f"the sandbox state folder holds no sandbox ({records})")


if __name__ == "__main__":
    sys.exit(main())
