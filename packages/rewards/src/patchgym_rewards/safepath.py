"""A safe import path for the test command, and the names new modules must not take.

``python -m pytest`` puts the working directory first on ``sys.path``, ahead of the
stdlib and site-packages: a new ``json.py`` or ``pluggy.py`` in the repository would be
imported instead of the real one. The grader puts :data:`SITECUSTOMIZE` first on
``PYTHONPATH`` for the eval script: for ``-m`` it moves the working directory from
the front of ``sys.path`` to just before site-packages (behind the stdlib), on every
Python version (``-P`` / ``PYTHONSAFEPATH`` would also drop a script's own folder,
which Django's ``runtests.py`` needs); it then runs the environment's own
``sitecustomize``, if any. The diff policy reverts new top-level modules named like
:data:`SHADOW_QUERY`'s answer (the env's stdlib and installed distributions' names).
"""

from __future__ import annotations

import re
import sys

SITECUSTOMIZE = """\
import os as _os
import sys as _sys

_HERE = _os.path.dirname(_os.path.abspath(__file__))
_sys.path[:] = [p for p in _sys.path if p != _HERE]


def _patchgym_safe_path():
    import runpy

    run = runpy._run_module_as_main

    def _run_module_as_main(mod_name, alter_argv=True):
        cwd = _os.getcwd()
        if _sys.path and _sys.path[0] in ("", cwd):
            first = _sys.path.pop(0)
            site = [i for i, p in enumerate(_sys.path) if p.endswith(("site-packages", "dist-packages"))]
            _sys.path.insert(site[0] if site else len(_sys.path), first)
        return run(mod_name, alter_argv)

    runpy._run_module_as_main = _run_module_as_main


def _patchgym_chain():
    import importlib.machinery
    import importlib.util

    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _sys.path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_patchgym_safe_path()
_patchgym_chain()
"""

SHADOW_PREFIX = "PATCHGYM_SHADOW="
"""What starts the line of :data:`SHADOW_QUERY`'s answer."""

SHADOW_QUERY = """\
import json, os, sys
names = set(getattr(sys, "stdlib_module_names", ())) | set(sys.builtin_module_names)
SUFFIXES = (".py", ".pyc", ".pyw", ".so", ".pyd", ".pth")
for entry in sys.path:
    here = not entry or os.path.abspath(entry) == os.getcwd()
    try:
        listing = list(os.scandir(entry or "."))
    except OSError:
        continue
    for item in listing:
        name = item.name
        if name.endswith((".dist-info", ".egg-info")):
            try:
                with open(os.path.join(item.path, "top_level.txt")) as top:
                    names.update(top.read().split())
            except (OSError, ValueError):
                pass
        elif not here and (name.endswith(SUFFIXES) or item.is_dir()):
            names.add(name.split(".")[0])
print("PATCHGYM_SHADOW=" + json.dumps(sorted(names)))
"""
"""Python (read from stdin, run isolated with ``-I``) printing the names to protect: the
stdlib's, every folder, module, extension module and ``.pth`` file in the import path's folders
(what an installed distribution can be imported as), and the ``top_level.txt`` names of the
distributions there (packages an editable install maps from elsewhere). The working
directory itself is not listed: the repository's own new modules are what is judged. One
``listdir`` per folder, no ``importlib.metadata``: a large environment's ``RECORD`` files
(torch's lists 10,000 files) made the old query cost 0.2 s per grading."""

_INTERPRETER = re.compile(r"(?:^|[\s;&|(])((?:[\w./-]*/)?python[\d.]*)(?=\s)")
_IDENT = re.compile(r"[A-Za-z_]\w*")


def interpreter_of(eval_script: str) -> str:
    """The Python the eval script runs (``.venv/bin/python``), ``python3`` if none is named."""
    match = _INTERPRETER.search(eval_script)
    return match.group(1) if match else "python3"


def shadow_names(output: str) -> frozenset[str]:
    """Names from :data:`SHADOW_QUERY`'s output, with this interpreter's stdlib added."""
    import json

    names = set(getattr(sys, "stdlib_module_names", ())) | set(sys.builtin_module_names)
    for line in output.splitlines():
        if line.startswith(SHADOW_PREFIX):
            try:
                found = json.loads(line.removeprefix(SHADOW_PREFIX))
            except ValueError:
                continue
            names.update(n for n in found if isinstance(n, str))
    return frozenset(n for n in names if _IDENT.fullmatch(n) and not n.startswith("__"))


__all__ = ["SHADOW_PREFIX", "SHADOW_QUERY", "SITECUSTOMIZE", "interpreter_of", "shadow_names"]
