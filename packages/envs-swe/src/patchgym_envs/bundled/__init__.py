"""Bundled tasks: small real libraries with a real bug and a real test suite.

The embedded default's data (``patchgym validate`` runs them). Three are in R2E-Gym
form (hidden ``r2e_tests`` + ``expected_output_json``), three in SWE-bench form (test
patch + FAIL_TO_PASS / PASS_TO_PASS); ``ledger`` is the one where a debugger finds the
bug quickly. On the local backend a task's ``template`` is ``bundled:<name>``, which
:func:`resolve_template` materialises as a git repo at the base commit; on Docker the
task's ``image`` is built by :mod:`patchgym_envs.bundled.docker`.

Eval scripts call ``python3 -m pytest``: in the images pytest is installed; on the local
backend the environment puts the interpreter it was given (default: the driver's
``sys.executable``, which has pytest because this package depends on it) first on PATH.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from patchgym_envs.bundled.template import digest as _digest
from patchgym_envs.bundled.template import materialise, source_files, tasks_root
from patchgym_envs.errors import UnknownTaskError
from patchgym_envs.task import Task

TEMPLATE_PREFIX = "bundled:"
IMAGE_REPO = "patchgym-bundled"


def bundled_names() -> list[str]:
    """Names of the bundled tasks, sorted."""
    return list(_names())


@cache
def _names() -> tuple[str, ...]:
    """The package's task folders, listed once: package data does not change while the
    process runs, and every episode's sandbox spec resolves its template through this."""
    return tuple(
        sorted(
            c.name
            for c in tasks_root().iterdir()
            if c.is_dir() and c.joinpath("task.json").is_file()
        )
    )


def image_for(name: str) -> str:
    """Content-addressed local image tag of a bundled task (built by ``bundled.docker``)."""
    return f"{IMAGE_REPO}/{name}:{_digest(source_files(name))[:12]}"


@cache
def _load(name: str) -> Task:
    root = tasks_root().joinpath(name)
    meta: dict[str, Any] = json.loads(root.joinpath("task.json").read_text())
    _, base_commit = materialise(name)
    form = meta["form"]
    hidden: dict[str, str] = {}
    if root.joinpath("hidden").is_dir():
        stack = [(root.joinpath("hidden"), "")]
        while stack:
            node, prefix = stack.pop()
            for child in node.iterdir():
                if child.name == "__pycache__":
                    continue
                if child.is_dir():
                    stack.append((child, f"{prefix}{child.name}/"))
                else:
                    hidden[f"{prefix}{child.name}"] = child.read_text()
    test_patch = (
        root.joinpath("test.patch").read_text() if root.joinpath("test.patch").is_file() else ""
    )
    from patchgym_envs.patches import diff_files

    existing, created = diff_files(test_patch)
    return Task(
        id=meta["id"],
        source_format="bundled",
        repo=meta["repo"],
        base_commit=base_commit,
        problem_statement=root.joinpath("problem.md").read_text(),
        image=image_for(name),
        template=f"{TEMPLATE_PREFIX}{name}",
        workdir="/testbed",
        env={"PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        gold_patch=root.joinpath("gold.patch").read_text(),
        test_patch=test_patch,
        test_files=existing,
        new_test_files=created,
        hidden_files=dict(sorted(hidden.items())),
        eval_script=meta["eval_script"],
        eval_timeout=300.0,
        test_cmd="python3 -m pytest -q -p no:cacheprovider tests",
        grader="r2e" if form == "r2egym" else "swebench",
        log_parser="r2e" if form == "r2egym" else "pytest",
        fail_to_pass=meta.get("fail_to_pass", []),
        pass_to_pass=meta.get("pass_to_pass", []),
        expected_output_json=meta.get("expected_output_json"),
        metadata={"form": form, "bundled_name": name, **meta.get("metadata", {})},
    )


def bundled_task(name: str) -> Task:
    """One bundled task by name (``ledger``) or id (``patchgym__ledger-1``)."""
    names = bundled_names()
    key = (
        name.removeprefix("patchgym__").rsplit("-", 1)[0] if name.startswith("patchgym__") else name
    )
    if key not in names:
        raise UnknownTaskError(f"no bundled task {name!r} — bundled: {', '.join(names)}")
    return _load(key)


def bundled_tasks() -> list[Task]:
    """Every bundled task (their templates are materialised on first call)."""
    return [_load(n) for n in bundled_names()]


def resolve_template(template: str | None) -> str | None:
    """``bundled:<name>`` -> the materialised template folder; other values unchanged."""
    if template is None or not template.startswith(TEMPLATE_PREFIX):
        return template
    name = template[len(TEMPLATE_PREFIX) :]
    if name not in _names():
        raise UnknownTaskError(f"no bundled task {name!r} — bundled: {', '.join(bundled_names())}")
    path, _ = materialise(name)
    return str(path)


def template_path(name: str) -> Path:
    return materialise(name)[0]


__all__ = [
    "bundled_names",
    "bundled_task",
    "bundled_tasks",
    "image_for",
    "resolve_template",
    "template_path",
]
