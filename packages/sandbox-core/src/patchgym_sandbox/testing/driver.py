"""A rollout driver to be SIGKILLed by the conformance suite: starts sandboxes, then hangs.

``python -m patchgym_sandbox.testing.driver '<json>'`` with keys ``config`` (backend config),
``spec`` (SandboxSpec fields), ``run_id`` and ``n``. Prints ``READY <ids>`` once all run.
"""

from __future__ import annotations

import asyncio
import json
import sys

from patchgym_sandbox.registry import create_backend
from patchgym_sandbox.spec import SandboxSpec


async def _main(args: dict[str, object]) -> None:
    backend = create_backend(args["config"])  # type: ignore[arg-type]  # args is parsed JSON
    spec = SandboxSpec.model_validate(args["spec"])
    boxes = [backend.sandbox(spec, run_id=str(args["run_id"])) for _ in range(int(args["n"]))]  # type: ignore[call-overload]  # args is parsed JSON
    await asyncio.gather(*(b.start() for b in boxes))
    await asyncio.gather(*(b.exec("true", timeout=60) for b in boxes))
    print("READY", " ".join(b.id for b in boxes), flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(_main(json.loads(sys.argv[1])))
