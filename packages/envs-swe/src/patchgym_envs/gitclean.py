"""No future in ``.git``: reduce a repository to its base commit's history.

A template cloned from an upstream mirror holds every later commit, its tags, remote
branches, reflogs and stashes: ``git log --all --grep`` or ``git show <tag>:<file>``
hands a policy the upstream fix. :func:`reduce_to_base` keeps one branch at the base
commit and only the objects reachable from it: no tags, remotes, other refs, reflogs,
alternates, ``FETCH_HEAD``/``ORIG_HEAD``, commit-graphs or packs holding later commits.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

BRANCH = "main"
_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
}
REDUCE_SCRIPT = f"""set -eu
g() {{ git -c core.hooksPath=/dev/null -c gc.auto=0 -c core.fsmonitor=false \
  -c protocol.allow=never "$@"; }}
sha=$(g rev-parse --verify "${{1:-HEAD}}^{{commit}}")
gitdir=$(g rev-parse --absolute-git-dir)
refs=$(g for-each-ref --format='%(refname)')
g update-ref --no-deref HEAD "$sha"
for ref in $refs; do g update-ref -d "$ref"; done
g update-ref refs/heads/{BRANCH} "$sha"
g symbolic-ref HEAD refs/heads/{BRANCH}
for section in $(g config --local --name-only --list | grep -E '^(remote|branch)[.]' \\
    | sed 's/[.][^.]*$//' | sort -u); do
  g config --local --remove-section "$section" 2>/dev/null || true
done
(cd "$gitdir" && rm -f FETCH_HEAD ORIG_HEAD MERGE_HEAD CHERRY_PICK_HEAD REVERT_HEAD \\
  BISECT_LOG shallow packed-refs.lock && rm -rf logs refs/original rr-cache modules worktrees)
g repack -a -d -q --no-write-bitmap-index
(cd "$gitdir/objects" && rm -rf info/alternates info/commit-graph info/commit-graphs \\
  info/packs info/multi-pack-index pack/multi-pack-index)
g prune --expire=now
g prune-packed
echo "$sha"
"""
"""POSIX sh, run in the repository, base revision as ``$1`` (default HEAD); prints the
base commit's sha. The one implementation: :func:`reduce_to_base` runs it on this machine,
``patchgym_envs.cleanimages`` inside a container of an image pulled as-is. No git
transport is allowed (``protocol.allow=never``): it never reaches a network, even where
the sandbox has one (a k8s pod) or the repository is a partial clone."""


class GitCleanError(RuntimeError):
    """A git step of :func:`reduce_to_base` failed (the repository may be half reduced)."""


def reduce_to_base(repo: Path, base: str = "HEAD") -> str:
    """Leave ``repo`` with ``base``'s history only; return the base commit's sha.

    HEAD becomes branch ``main`` at the base commit (the working tree and index are not
    touched), every other ref and remote is deleted, reflogs and state files removed,
    objects borrowed through alternates copied in, and everything is repacked into one
    pack of the objects reachable from the base commit (or the index); the rest is
    pruned (:data:`REDUCE_SCRIPT`).
    """
    done = subprocess.run(
        ["sh", "-c", REDUCE_SCRIPT, "reduce-to-base", base],
        cwd=repo,
        env={**os.environ, **_ENV},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise GitCleanError(f"reducing {repo} to {base}: {done.stderr.strip()[-400:]}")
    return done.stdout.strip().splitlines()[-1]


__all__ = ["REDUCE_SCRIPT", "GitCleanError", "reduce_to_base"]
