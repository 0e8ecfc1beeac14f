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
GIT = f"{' '.join(GIT_ENV)} git {' '.join(GIT_OPTIONS)}"
"""git with system/global config, hooks, fsmonitor and attribute files switched off.
Diff commands also pass ``--no-ext-diff --no-textconv``. A shell command prefix (the
variables are assignments the shell makes for that one command, no ``env`` process): use
it where a simple command stands (not after ``xargs`` or ``exec``-style launchers)."""

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
if printf '%s\\n' "$names" | grep -qvE -e '{KEPT_KEYS}' -e '^$'; then
  if printf '%s\\n' "$names" | grep -qiE '{DANGEROUS_KEYS}'; then t=1; fi
  keep=$({GIT} config --file "$d/config" --get-regexp '{KEPT_KEYS}' 2>/dev/null)
  rm -f "$d/config.patchgym"
  printf '%s\\n' "$keep" | while read -r k v; do
    [ -n "$k" ] && {GIT} config --file "$d/config.patchgym" "$k" "$v"
  done
  touch "$d/config.patchgym" && mv -f "$d/config.patchgym" "$d/config"
fi
h=0
[ -d "$d/hooks" ] && for f in "$d"/hooks/* "$d"/hooks/.[!.]* "$d"/hooks/..?*; do
  case $f in *.sample) [ -f "$f" ] && [ ! -L "$f" ] && continue ;; esac
  if [ -e "$f" ] || [ -L "$f" ]; then h=1; break; fi
done
if [ $h = 1 ] && [ -n "$(find "$d/hooks" -type f ! -name '*.sample' -print -delete)" ]
then t=1; fi
a="$d/info/attributes" w="$d/config.worktree"
if [ -s "$a" ] || [ -e "$w" ]; then t=1; fi
if [ -e "$a" ] || [ -L "$a" ] || [ -e "$w" ] || [ -L "$w" ]; then rm -f "$a" "$w"; fi
echo "{TAMPERED}=$t"
"""
"""Shell that resets the repository's git config to its format keys; prints whether
anything that runs commands or redirects git was there. It runs on every grading (and
before every diff is taken), so the common case is kept to few processes: a config that
holds only format keys already is left as it is (rewriting it would give the same file),
and then cannot hold a dangerous key either (no format key is one), so one ``grep`` decides
both; ``find`` (which deletes every hook that is not a sample, at any depth) runs only
when ``hooks/`` holds anything but regular ``*.sample`` files, ``rm`` only when there is
something to remove."""


def tampered(output: str) -> bool:
    """Whether :data:`CLEAN_CONFIG`'s output says the config carried commands."""
    return f"{TAMPERED}=1" in output


__all__ = ["CLEAN_CONFIG", "GIT", "GIT_ENV", "GIT_OPTIONS", "TAMPERED", "tampered"]
