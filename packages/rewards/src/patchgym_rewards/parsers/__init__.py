"""Test-log parsers, selectable by name or by repository.

Names follow the SWE-bench harness (``parse_log_pytest`` and ``pytest`` both work), so
a dataset row's ``log_parser`` field can be passed straight through.
"""

from __future__ import annotations

from typing import Protocol

from patchgym_rewards.errors import UnknownParserError
from patchgym_rewards.parsers.javascript import parse_jest
from patchgym_rewards.parsers.pytest import (
    parse_matplotlib,
    parse_pytest,
    parse_pytest_options,
    parse_pytest_v2,
    parse_pytest_verbose,
    parse_seaborn,
)
from patchgym_rewards.parsers.r2e import parse_r2e
from patchgym_rewards.parsers.sympy import parse_sympy
from patchgym_rewards.parsers.unittest import parse_django, parse_unittest
from patchgym_rewards.status import StatusMap
from patchgym_rewards.text import normalize


class Parser(Protocol):
    """``parser(text)`` -> status map; ``worst=True`` keeps each test's worst outcome."""

    def __call__(self, text: str, /, *, worst: bool = False) -> StatusMap: ...


PARSERS: dict[str, Parser] = {
    "pytest": parse_pytest,
    "pytest_options": parse_pytest_options,
    "pytest_v2": parse_pytest_v2,
    "pytest_verbose": parse_pytest_verbose,
    "matplotlib": parse_matplotlib,
    "seaborn": parse_seaborn,
    "django": parse_django,
    "unittest": parse_unittest,
    "sympy": parse_sympy,
    "r2e": parse_r2e,
    "jest": parse_jest,
    # harness aliases (same function, the repository's name)
    "astroid": parse_pytest,
    "flask": parse_pytest,
    "marshmallow": parse_pytest,
    "pvlib": parse_pytest,
    "pyvista": parse_pytest,
    "sqlfluff": parse_pytest,
    "xarray": parse_pytest,
    "pydicom": parse_pytest_options,
    "requests": parse_pytest_options,
    "pylint": parse_pytest_options,
    "astropy": parse_pytest_v2,
    "scikit": parse_pytest_v2,
    "sphinx": parse_pytest_v2,
}

REPO_PARSERS: dict[str, str] = {
    "astropy/astropy": "astropy",
    "django/django": "django",
    "marshmallow-code/marshmallow": "marshmallow",
    "matplotlib/matplotlib": "matplotlib",
    "mwaskom/seaborn": "seaborn",
    "pallets/flask": "flask",
    "psf/requests": "requests",
    "pvlib/pvlib-python": "pvlib",
    "pydata/xarray": "xarray",
    "pydicom/pydicom": "pydicom",
    "pylint-dev/astroid": "astroid",
    "pylint-dev/pylint": "pylint",
    "pytest-dev/pytest": "pytest",
    "pyvista/pyvista": "pyvista",
    "scikit-learn/scikit-learn": "scikit",
    "sqlfluff/sqlfluff": "sqlfluff",
    "sphinx-doc/sphinx": "sphinx",
    "sympy/sympy": "sympy",
}


def get_parser(name: str) -> Parser:
    """The parser called ``name`` (``pytest`` or the harness's ``parse_log_pytest``)."""
    key = name.removeprefix("parse_log_")
    try:
        return PARSERS[key]
    except KeyError:
        raise UnknownParserError(
            f"unknown log parser {name!r} — known: {', '.join(sorted(PARSERS))}"
        ) from None


def parser_for_repo(repo: str) -> str:
    """The harness's parser name for a SWE-bench repository (``owner/name``)."""
    try:
        return REPO_PARSERS[repo]
    except KeyError:
        raise UnknownParserError(
            f"no log parser known for repository {repo!r} — pass log_parser explicitly; "
            f"known repositories: {', '.join(sorted(REPO_PARSERS))}"
        ) from None


def parse_log(log: bytes | str, parser: str = "pytest", *, worst: bool = False) -> StatusMap:
    """Normalise ``log`` (bytes or str, ANSI, ``\\r``) and parse it with ``parser``."""
    return get_parser(parser)(normalize(log), worst=worst)


__all__ = [
    "PARSERS",
    "REPO_PARSERS",
    "Parser",
    "get_parser",
    "parse_django",
    "parse_jest",
    "parse_log",
    "parse_matplotlib",
    "parse_pytest",
    "parse_pytest_options",
    "parse_pytest_v2",
    "parse_pytest_verbose",
    "parse_r2e",
    "parse_seaborn",
    "parse_sympy",
    "parse_unittest",
    "parser_for_repo",
]
