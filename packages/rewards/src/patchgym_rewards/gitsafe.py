"""Git that obeys only the grader: no hooks, filters, attributes or repository config.

Every git command grading runs (the diff policy, resetting test files, applying the
hidden patch, extracting the agent's diff) goes through :data:`GIT`, and before the
first one :data:`CLEAN_CONFIG` rewrites the repository's ``.git/config`` to its format
keys only (``core.repositoryformatversion``, ``extensions.*`` ...), removes
``info/attributes``, ``config.worktree`` and every non-sample hook. So a smudge or
clean filter, a ``post-checkout`` hook, ``diff.external``, a textconv driver, a
``core.fsmonitor`` command or ``core.worktree`` planted in an episode's sandbox runs
nothing and changes nothing when grading resets the tests (``grading.sandbox=same``),
and cannot decide what patch is extracted.
"""

from __future__ import annotations

GIT_ENV = (
    "GIT_CONFIG_NOSYSTEM=1",
    "GIT_CONFIG_GLOBAL=/dev/null",
    "GIT_ATTR_NOSYSTEM=1",
    "GIT_TERMINAL_PROMPT=0",
    "GIT_EXTERNAL_DIFF=",
)
GIT_OPTIONS = (
    "-c core.hooksPath=/dev/null",
    "-c core.fsmonitor=false",
    "-c core.attributesFile=/dev/null",
    "-c core.autocrlf=false",
    "-c core.safecrlf=false",
    "-c 'safe.directory=*'",
)
GIT = f"env {' '.join(GIT_ENV)} git {' '.join(GIT_OPTIONS)}"
"""git with system/global config, hooks, fsmonitor and attribute files switched off.
Diff commands also pass ``--no-ext-diff --no-textconv``."""

DANGEROUS_KEYS = (
    r"^(filter\.|diff\.external|diff\..*\.(textconv|command)|merge\..*\.driver"
    r"|core\.(hookspath|fsmonitor|attributesfile|sshcommand|pager|editor|askpass|gitproxy"
    r"|worktree|excludesfile)|include\.|includeif\.|alias\.|credential\.|uploadpack\."
    r"|gpg\.|sequence\.editor)"
)

KEPT_KEYS = r"^(core\.(repositoryformatversion|bare|filemode|logallrefupdates)|extensions\..*)$"

TAMPERED = "PATCHGYM_GIT_TAMPERED"

CLEAN_CONFIG = f"""\
d=$({GIT} rev-parse --absolute-git-dir 2>/dev/null) || exit 0
t=0
names=$({GIT} config --file "$d/config" --name-only --list 2>/dev/null) || names=unreadable.
if printf '%s\\n' "$names" | grep -qiE '{DANGEROUS_KEYS}'; then t=1; fi
if [ -d "$d/hooks" ] && [ -n "$(find "$d/hooks" -type f ! -name '*.sample' -print -delete)" ]
then t=1; fi
if [ -s "$d/info/attributes" ] || [ -e "$d/config.worktree" ]; then t=1; fi
if printf '%s\\n' "$names" | grep -qvE -e '{KEPT_KEYS}' -e '^$'; then
  keep=$({GIT} config --file "$d/config" --get-regexp '{KEPT_KEYS}' 2>/dev/null)
  rm -f "$d/config.patchgym"
  printf '%s\\n' "$keep" | while read -r k v; do
    [ -n "$k" ] && {GIT} config --file "$d/config.patchgym" "$k" "$v"
  done
  touch "$d/config.patchgym" && mv -f "$d/config.patchgym" "$d/config"
fi
rm -f "$d/info/attributes" "$d/config.worktree"
echo "{TAMPERED}=$t"
"""
"""Shell that resets the repository's git config to its format keys; prints whether
anything that runs commands or redirects git was there. A config that holds only format
keys already is left as it is (rewriting it would give the same file): two git processes
instead of one per kept key, on every grading."""


def tampered(output: str) -> bool:
    """Whether :data:`CLEAN_CONFIG`'s output says the config carried commands."""
    return f"{TAMPERED}=1" in output


__all__ = ["CLEAN_CONFIG", "GIT", "GIT_ENV", "GIT_OPTIONS", "TAMPERED", "tampered"]
