"""What ``patchgym validate`` imports before its first sandbox: none of the heavy clients.

Every command pays its imports on each start (``bench/cli_startup.py`` times them): the
OpenAI client alone is about half a second, and ``patchgym validate`` on the local
backend uses no model, no plotting library, no other backend's SDK. Probed in a child
interpreter, so what other test files imported does not count.
"""

from __future__ import annotations

import subprocess
import sys

HEAVY = (
    "openai",
    "httpx",
    "matplotlib",
    "numpy",
    "torch",
    "ray",
    "docker",
    "kubernetes",
    "e2b",
    "datasets",
    "pyarrow",
)

PROBE = """
import sys
from patchgym_sandbox import create_backend
from patchgym_trainer.cli import app
from patchgym_trainer.commands.validate import run_validate
from patchgym_trainer.compose import compose
from patchgym_trainer.datasets import load_dataset

cfg = compose([])
load_dataset(cfg.dataset)
create_backend(cfg.sandbox)
print(" ".join(sorted({name.split(".")[0] for name in sys.modules})))
"""


def test_validate_on_the_local_backend_imports_no_heavy_client() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert "patchgym_trainer" in loaded  # the probe ran
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))
