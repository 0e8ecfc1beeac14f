"""Install specifications for local environments: the SWE-bench harness's per-repo/version
table (exported from swebench 4.1.0, the last release that carries it) or the user's own.

A spec says which Python, which packages and which commands make a repository's test
environment. :func:`buildable` decides *before* anything is built whether uv can make it on
this machine; a spec that needs conda-only packages or system packages is refused with the
reason, never half-built.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

SYSTEM_PACKAGE_COMMANDS = re.compile(r"\b(apt-get|apt|yum|dnf|apk|conda|mamba|brew)\b")


class EnvSpec(BaseModel):
    """One repository version's test environment, in the harness's own vocabulary."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    python: str
    """``major.minor`` of the interpreter."""
    packages: str = ""
    """``requirements.txt`` (read from the repository), ``environment.yml`` (conda: not
    buildable with uv), or a space-separated list of packages."""
    pip_packages: list[str] = Field(default_factory=list)
    pre_install: list[str] = Field(default_factory=list)
    """Shell commands run in the repository before ``install`` (system-package managers refused)."""
    install: str = ""
    """Installs the repository itself (``python -m pip install -e .``), run verbatim."""
    post_install: list[str] = Field(default_factory=list)
    eval_commands: list[str] = Field(default_factory=list)
    """Run before the tests at grading time (exports, locale)."""
    test_cmd: str | list[str] = "pytest -rA"
    requirements_paths: list[str] = Field(default_factory=list)
    """Where ``packages: requirements.txt`` reads from, relative to the repository root."""

    @property
    def test_command(self) -> str:
        return self.test_cmd if isinstance(self.test_cmd, str) else " && ".join(self.test_cmd)

    def key(self, repo: str) -> str:
        """Content address of the environment: tasks of one repo with equal specs share it."""
        blob = json.dumps({"repo": repo, **self.model_dump(mode="json")}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


class SpecTable(BaseModel):
    """``{repo: {"versions": {version: spec}, "requirements_paths": [...]}}``."""

    model_config = ConfigDict(extra="ignore")

    source: str = "user"
    repos: dict[str, dict[str, Any]] = Field(default_factory=dict)

    def lookup(self, repo: str, version: str | None) -> EnvSpec | None:
        entry = self.repos.get(repo)
        if entry is None or version is None:
            return None
        raw = entry.get("versions", {}).get(str(version))
        if raw is None:
            return None
        return EnvSpec.model_validate(
            {"requirements_paths": entry.get("requirements_paths", []), **raw}
        )

    def merged(self, other: SpecTable) -> SpecTable:
        """``other``'s repositories and versions take precedence over this table's."""
        repos = {r: {**e, "versions": dict(e.get("versions", {}))} for r, e in self.repos.items()}
        for repo, entry in other.repos.items():
            mine = repos.setdefault(repo, {"versions": {}})
            mine["versions"].update(entry.get("versions", {}))
            for k, v in entry.items():
                if k != "versions":
                    mine[k] = v
        return SpecTable(source=f"{self.source}+{other.source}", repos=repos)


@cache
def harness_specs() -> SpecTable:
    text = resources.files("patchgym_envs.localbuild").joinpath("harness_specs.json").read_text()
    return SpecTable.model_validate_json(text)


def load_specs(path: str | Path | None) -> SpecTable:
    """The harness table, overlaid with a user's JSON or YAML table of the same shape."""
    base = harness_specs()
    if path is None:
        return base
    p = Path(path)
    text = p.read_text()
    if p.suffix in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text)
    else:
        data = json.loads(text)
    return base.merged(SpecTable.model_validate({"source": str(p), **data}))


def buildable(spec: EnvSpec) -> str | None:
    """Why uv cannot build ``spec`` here, or None when it can be tried."""
    if spec.packages.strip() == "environment.yml":
        return "conda-only environment (packages: environment.yml)"
    for cmd in (*spec.pre_install, spec.install, *spec.post_install):
        found = SYSTEM_PACKAGE_COMMANDS.search(cmd)
        if found:
            return f"needs system packages ({found.group(1)} in {cmd.strip()[:80]!r})"
    if spec.packages.strip() == "requirements.txt" and not spec.requirements_paths:
        return "packages: requirements.txt but the table names no requirements file"
    return None
