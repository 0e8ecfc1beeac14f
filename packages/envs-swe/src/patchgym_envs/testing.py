"""Test helpers: an image pulled as-is whose ``.git`` holds the future, and the checks a
policy would run to find it (shared by this package's tests and the trainer's k8s tests).

:func:`build_future_image` builds, with no network, an image named like SWE-bench's whose
``/testbed`` repository has the base commit checked out and, besides, a later commit
holding ``THE FIX``, tags, a branch and a remote ref. :func:`git_checks` runs
``git log --all``, ``git rev-list --all --objects``, ``git cat-file
--batch-all-objects``, ``git fsck --unreachable`` and a grep for the fix in a sandbox;
:func:`assert_no_future` says the sandbox holds the base commit's history only.
"""

from __future__ import annotations

import os
import subprocess

from patchgym_sandbox import Sandbox

FUTURE_DOCKERFILE = """FROM local/bookworm-py
RUN set -e; mkdir -p /testbed; cd /testbed; export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t \\
  GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t; git init -q -b main . \\
 && printf 'def add(a, b):\\n    return a - b\\n' > lib.py && git add -A && git commit -qm base \\
 && git tag v1 && printf 'def add(a, b):\\n    return a + b  # THE FIX\\n' > lib.py \\
 && git commit -qam 'THE FIX' && git tag -a v2 -m fixed && git branch later \\
 && git update-ref refs/remotes/origin/main HEAD && git gc -q && git reset -q --hard v1
WORKDIR /testbed
CMD ["sleep", "infinity"]
"""
GIT_CHECKS = {
    "base": "git rev-parse v1 2>/dev/null || git rev-parse HEAD",
    "log": "git log --all --format=%H",
    "objects": "git rev-list --all --objects | cut -d' ' -f1 | sort",
    "reachable": "git rev-list --objects HEAD | cut -d' ' -f1 | sort",
    "stored": "git cat-file --batch-all-objects --batch-check | cut -d' ' -f1 | sort",
    "unreachable": "git fsck --unreachable --no-reflogs 2>&1",
    "refs": "git for-each-ref --format='%(refname)'",
    "grep": "git log --all --grep 'THE FIX' --format=%H; git log --all -p | grep -c 'THE FIX'",
    "lib": "cat lib.py",
}


def build_future_image(tag: str) -> str:
    """Build the image as ``tag`` (needs ``local/bookworm-py``); returns its base commit."""
    subprocess.run(
        ["docker", "build", "--network", "none", "-q", "-t", tag, "-"],
        input=FUTURE_DOCKERFILE,
        text=True,
        check=True,
        capture_output=True,
        env={**os.environ, "DOCKER_BUILDKIT": "0"},
    )
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", tag, "git", "rev-parse", "v1"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


async def git_checks(sandbox: Sandbox) -> dict[str, str]:
    """The stdout of each of :data:`GIT_CHECKS` in ``sandbox``'s workdir."""
    return {
        name: (await sandbox.exec(cmd, timeout=60)).stdout.strip()
        for name, cmd in GIT_CHECKS.items()
    }


def holds_the_future(checks: dict[str, str]) -> bool:
    return checks["grep"].splitlines()[-1] != "0" and "refs/tags/v2" in checks["refs"]


def assert_no_future(checks: dict[str, str], base: str) -> None:
    """Only ``base``'s history: no later commit, tag, remote, unreachable object or fix."""
    assert checks["log"] == base, checks
    assert checks["objects"] == checks["reachable"] == checks["stored"], checks
    assert checks["unreachable"] == "" and checks["refs"] == "refs/heads/main", checks
    assert checks["grep"] == "0" and checks["lib"].endswith("a - b"), checks


__all__ = [
    "FUTURE_DOCKERFILE",
    "GIT_CHECKS",
    "assert_no_future",
    "build_future_image",
    "git_checks",
    "holds_the_future",
]
