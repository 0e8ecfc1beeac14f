"""Bytecode for the test runner that local sandboxes borrow from this interpreter.

On the local backend an eval script's ``python3`` is this process's interpreter (its folder
first on PATH, :func:`patchgym_envs.sandboxes.local_path`), so each grading runs this
environment's pytest, in a sandbox that cannot write site-packages and (bundled tasks)
with ``PYTHONDONTWRITEBYTECODE``. In an environment installed without bytecode (``uv sync``
without ``--compile-bytecode``, uv's default) every grading then compiles pytest and its
plugins again: 0.38 s of CPU per pytest run instead of 0.17 s, measured. :func:`compile_runner`
writes that bytecode from the host once per process, as an installer's compile step
would (whatever ``PYTHONDONTWRITEBYTECODE`` says: it governs imports, not installs);
up-to-date files are only checked (a few milliseconds), and a folder that cannot be
written is left as it is.
"""

from __future__ import annotations

import compileall
import functools
import importlib.util
from collections.abc import Sequence
from pathlib import Path

RUNNER_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py")
"""Compiled whole: what ``python3 -m pytest`` imports beyond the standard library (pytest 8-9)."""

RUNNER_MODULES = tuple(
    f"pygments{suffix}"
    for suffix in (
        "",
        ".console",
        ".filter",
        ".filters",
        ".formatter",
        ".formatters",
        ".formatters._mapping",
        ".formatters.terminal",
        ".lexer",
        ".lexers",
        ".lexers._mapping",
        ".lexers.diff",
        ".lexers.python",
        ".modeline",
        ".plugin",
        ".regexopt",
        ".styles",
        ".styles._mapping",
        ".token",
        ".unistring",
        ".util",
    )
)
"""Compiled one by one: the modules of the packages pytest takes a few files from (its
terminal writer's highlighting; the rest of pygments is hundreds of lexers)."""


def _source(name: str) -> Path | None:
    """The source file of module ``name``, found without importing anything."""
    top, _, rest = name.partition(".")
    spec = importlib.util.find_spec(top)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    if not rest:
        return Path(spec.origin)
    base = Path(spec.origin).parent.joinpath(*rest.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def compile_modules(packages: Sequence[str], modules: Sequence[str] = ()) -> bool:
    """Write the missing or stale bytecode of the installed ``packages`` (top-level names,
    every file beneath) and ``modules`` (dotted names, one file each); absent ones are
    skipped. False when some could not be written."""
    ok = True
    for name in packages:
        source = _source(name)
        if source is None:
            continue
        if source.name == "__init__.py":
            ok = bool(compileall.compile_dir(source.parent, quiet=2)) and ok
        else:
            ok = bool(compileall.compile_file(source, quiet=2)) and ok
    for name in modules:
        source = _source(name)
        if source is not None and source.is_file():
            ok = bool(compileall.compile_file(source, quiet=2)) and ok
    return ok


@functools.cache
def compile_runner() -> bool:
    """:func:`compile_modules` of the test runner, once per process."""
    return compile_modules(RUNNER_PACKAGES, RUNNER_MODULES)
