"""The diff policy: which of the agent's changes steer the test run, and undoing them.

A patch is graded on what it does to the code, not on what it does to the runner.
Before the hidden tests run, every change to a file that decides what is collected or
how the runner starts is reset to the base commit (or removed when the base lacks it);
the verdict lists those paths. See the README for the table per harness.
"""

from __future__ import annotations

import configparser
import logging
import shlex
import tomllib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from patchgym_rewards.gitsafe import GIT
from patchgym_rewards.sandbox import ExecResultLike, SandboxLike

log = logging.getLogger(__name__)

STEERING_NAMES: frozenset[str] = frozenset(
    {
        "conftest.py",
        "pytest.ini",
        ".pytest.ini",
        "pytest.toml",
        ".pytest.toml",
        "tox.ini",
        "sitecustomize.py",
        "usercustomize.py",
        "entry_points.txt",  # an in-repo *.egg-info can register a pytest11 plugin
        ".gitattributes",  # filters, eol and encodings applied when the tests are reset
    }
)
"""File names that configure collection or run code when Python or the runner starts."""
STEERING_SUFFIXES: tuple[str, ...] = (".pth",)
SECTION_FILES: frozenset[str] = frozenset({"setup.cfg", "pyproject.toml"})
"""Files reverted only when their pytest section changed."""
RUNNER_NAMES: frozenset[str] = frozenset({"pytest", "_pytest", "pluggy", "py", "iniconfig"})
"""Packages a new repo directory or module must not shadow (``python -m pytest`` puts
the working directory first on ``sys.path``); ``pytest_*`` plugin names too."""
TEST_DIRS: frozenset[str] = frozenset({"tests", "test", "Tests", "Test"})
"""Top-level test directories (``django/test/`` or ``sympy/testing/`` are library code)."""

MODULE_SUFFIXES: tuple[str, ...] = (".py", ".pyc", ".pyw", ".so", ".pyd")


def top_module(path: str) -> str | None:
    """The importable top-level name a path creates at the repository root, or None.

    ``json.py`` -> ``json``, ``json/__init__.py`` -> ``json``,
    ``yaml.cpython-311-x86_64-linux-gnu.so`` -> ``yaml``; ``docs/x.md`` -> ``docs``.
    """
    parts = path.split("/")
    if len(parts) > 1:
        return parts[0]
    name = parts[0]
    return name.split(".")[0] if name.endswith(MODULE_SUFFIXES) else None


def shadow_prefix(path: str, shadows: frozenset[str]) -> str | None:
    """The root entry of ``path`` when it is importable as a name in ``shadows``, or None.

    The caller asks only for root entries the base commit lacks (a new file inside
    the repository's own package named like an installed distribution is not one).
    """
    top = top_module(path)
    if top is None or top not in shadows or top in TEST_DIRS:
        return None
    return path.split("/")[0]


def is_test_path(path: str) -> bool:
    """A visible test file: ``test_*.py``, ``*_test.py`` or under a top-level test directory."""
    parts = path.split("/")
    name = parts[-1]
    return (
        (name.startswith("test_") and name.endswith(".py"))
        or name.endswith("_test.py")
        or (len(parts) > 1 and parts[0] in TEST_DIRS)
    )


def runner_prefix(path: str) -> str | None:
    """The leading part of ``path`` that is named like the runner (``pytest/``), or None."""
    parts = path.split("/")
    for i, part in enumerate(parts):
        stem = part.removesuffix(".py")
        if stem in RUNNER_NAMES or stem.startswith("pytest_"):
            return "/".join(parts[: i + 1])
    return None


def steers(path: str, *, added: bool, tests: bool = True) -> bool:
    """Whether a change to ``path`` is reverted regardless of its content.

    ``added``: the base commit lacks it (runner-named paths count only then, so the
    pytest repository's own ``src/_pytest`` stays editable). ``tests``: visible test
    files count too.
    """
    name = path.rsplit("/", 1)[-1]
    if name in STEERING_NAMES or name.endswith(STEERING_SUFFIXES):
        return True
    if tests and is_test_path(path):
        return True
    return added and runner_prefix(path) is not None


def pytest_section(name: str, text: str) -> str:
    """The pytest configuration in a ``setup.cfg`` / ``pyproject.toml`` as comparable text.

    A file that does not parse yields its whole text: any change then counts.
    """
    try:
        if name == "pyproject.toml":
            tool = tomllib.loads(text).get("tool", {})
            return repr(tool.get("pytest")) if isinstance(tool, dict) else repr(tool)
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(text)
        return repr(
            {s: dict(parser[s]) for s in ("tool:pytest", "pytest") if parser.has_section(s)}
        )
    except (tomllib.TOMLDecodeError, configparser.Error):
        return text


class PolicyError(Exception):
    """Reverting failed; grading on top of the agent's steering files cannot be trusted."""

    def __init__(self, message: str, result: ExecResultLike) -> None:
        super().__init__(message)
        self.result = result


def _split(out: str) -> list[str]:
    return [p for p in out.split("\0") if p]


def _quote_all(paths: Iterable[str]) -> str:
    return " ".join(shlex.quote(p) for p in paths)


LIST_END = "/"
"""Ends one ``-z`` listing and starts the next in a batched exec: git prints relative
paths, never ``/``."""

KNOWN_STATUS = frozenset("AMDT")
"""``git diff --name-status`` letters that say whether the base has the path (``A``: it
has not); for any other (``U`` unmerged ...) the base is asked with ``ls-tree``."""


@dataclass(frozen=True)
class Changes:
    """What the working copy changes against the base commit."""

    changed: list[str]
    """Every changed path: tracked changes, then untracked (ignored included) files."""
    in_base: set[str]
    """Those of ``changed`` the base commit has."""
    roots: set[str]
    """The base commit's root entries."""
    unknown: list[str] = field(default_factory=list)
    """Changed paths whose presence in the base the listing could not tell."""


def changes_command(base: str) -> str:
    """Shell listing the changes against ``base`` and its root entries in one exec (no
    output dependency between the git commands); read it with :func:`parse_changes`."""
    q = shlex.quote(base)
    return (
        f"{GIT} diff --no-ext-diff --no-textconv --name-status --no-renames -z {q} && "
        f"printf '{LIST_END}\\000' && "
        f"{{ {GIT} ls-files --others -z; true; }} && "  # ignored files included
        f"printf '{LIST_END}\\000' && {GIT} ls-tree --name-only -z {q}"
    )


def parse_changes(stdout: str) -> Changes | None:
    """:func:`changes_command`'s output; None when it is not one (a git command failed)."""
    parts = stdout.split("\0")
    if parts.count(LIST_END) < 2:
        return None
    first = parts.index(LIST_END)
    second = parts.index(LIST_END, first + 1)
    pairs, others = parts[:first], parts[first + 1 : second]
    if len(pairs) % 2:  # "M\0path\0" per change
        return None
    changed: list[str] = []
    in_base: set[str] = set()
    unknown: list[str] = []
    for status, path in zip(pairs[0::2], pairs[1::2], strict=True):
        changed.append(path)
        if status not in KNOWN_STATUS:
            unknown.append(path)
        elif status != "A":
            in_base.add(path)
    changed += [p for p in others if p]
    roots = {p for p in parts[second + 1 :] if p}
    return Changes(list(dict.fromkeys(changed)), in_base, roots, unknown)


async def changed_paths(sandbox: SandboxLike, base: str) -> Changes:
    """The working copy's :class:`Changes` against ``base``: one exec (two when the status
    of a path cannot tell whether the base has it)."""
    listed = await sandbox.exec(changes_command(base))
    changes = parse_changes(listed.stdout) if listed.exit_code == 0 else None
    if changes is None:
        raise PolicyError("listing the agent's changes failed", listed)
    return await resolve_unknown(sandbox, base, changes)


async def resolve_unknown(sandbox: SandboxLike, base: str, changes: Changes) -> Changes:
    """Ask the base commit itself about the paths the listing could not place."""
    if not changes.unknown:
        return changes
    q = shlex.quote(base)
    asked = await sandbox.exec(
        f"{GIT} ls-tree -r --name-only -z {q} -- {_quote_all(changes.unknown)}"
    )
    if asked.exit_code != 0:
        raise PolicyError("listing the base commit's files failed", asked)
    return Changes(changes.changed, changes.in_base | set(_split(asked.stdout)), changes.roots)


ShadowSource = Callable[[], Awaitable[frozenset[str]]]
"""Asked once, only when the agent adds a new root entry: the names such an entry must
not take (the env's stdlib and installed distributions, see ``safepath``)."""


async def revert_steering(
    sandbox: SandboxLike,
    base_commit: str | None,
    *,
    tests: bool = True,
    changes: Changes | None = None,
    shadows: ShadowSource | None = None,
) -> list[str]:
    """Reset steering changes to ``base_commit`` (HEAD when None); return what was reverted.

    Paths the base has are checked out from it; others are removed (a runner-named
    directory as a whole, and a new root module or package named like one of
    ``shadows``' names: the stdlib, installed distributions; asked only when there is a
    new root entry). ``changes``: the listing when the caller already took it (see
    :func:`changes_command`). Raises :class:`PolicyError` when git cannot restore a file.
    """
    base = base_commit or "HEAD"
    if changes is None:
        changes = await changed_paths(sandbox, base)
    else:
        changes = await resolve_unknown(sandbox, base, changes)
    changed, in_base, roots = changes.changed, changes.in_base, changes.roots
    new_roots = [p for p in changed if p not in in_base and p.split("/")[0] not in roots]
    names = await shadows() if shadows is not None and new_roots else frozenset()
    restore: list[str] = []
    remove: list[str] = []
    for path in changed:
        added = path not in in_base
        if path.rsplit("/", 1)[-1] in SECTION_FILES:
            if await _section_changed(sandbox, base, path, added=added):
                (remove if added else restore).append(path)
            continue
        new_root = added and path.split("/")[0] not in roots
        shadow = shadow_prefix(path, names) if new_root else None
        if shadow is not None:
            if shadow not in remove:
                remove.append(shadow)
            continue
        if not steers(path, added=added, tests=tests):
            continue
        prefix = runner_prefix(path) if added else None
        if prefix is not None and not is_test_path(path):
            if prefix not in remove:
                remove.append(prefix)
        elif added:
            remove.append(path)
        else:
            restore.append(path)
    if remove:
        paths = _quote_all(remove)
        await sandbox.exec(
            f"{GIT} rm -q -r -f --cached --ignore-unmatch -- {paths}; rm -rf -- {paths}"
        )
    first = [p for p in restore if p.rsplit("/", 1)[-1] == ".gitattributes"]
    for batch in (first, [p for p in restore if p not in first]):
        if not batch:
            continue
        done = await sandbox.exec(f"{GIT} checkout {shlex.quote(base)} -- {_quote_all(batch)}")
        if done.exit_code != 0:
            raise PolicyError("restoring steering files to the base commit failed", done)
    reverted = sorted([*remove, *restore])
    if reverted:
        log.info("diff policy reverted: %s", reverted)
    return reverted


async def _section_changed(sandbox: SandboxLike, base: str, path: str, *, added: bool) -> bool:
    name = path.rsplit("/", 1)[-1]
    old = (
        "" if added else (await sandbox.exec(f"{GIT} show {shlex.quote(f'{base}:{path}')}")).stdout
    )
    try:
        new = (await sandbox.read_file(path)).decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return True  # deleted or unreadable: restore it
    return pytest_section(name, old) != pytest_section(name, new)
