"""Export the SWE-bench harness's per-repo/version install specs as JSON package data.

swebench 5.x builds environments from per-task Dockerfiles and no longer carries the
per-repo/version table; the last release that does is 4.1.0. Regenerate with:

    uv run --no-project --with swebench==4.1.0 python packages/envs-swe/scripts/export_harness_specs.py

It writes ``src/patchgym_envs/localbuild/harness_specs.json`` (Python repositories only).
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS
from swebench.harness.test_spec.python import MAP_REPO_TO_ENV_YML_PATHS, MAP_REPO_TO_REQS_PATHS

KEYS = (
    "python", "packages", "pip_packages", "pre_install", "install", "post_install",
    "eval_commands", "test_cmd", "no_use_env", "env_vars_test",
)  # fmt: skip


def main() -> None:
    out = Path(__file__).parents[1] / "src/patchgym_envs/localbuild/harness_specs.json"
    repos = {}
    for repo, versions in sorted(MAP_REPO_VERSION_TO_SPECS.items()):
        if repo not in MAP_REPO_TO_REQS_PATHS and not any(
            "python" in spec for spec in versions.values()
        ):
            continue  # not a Python repository
        repos[repo] = {
            "versions": {
                v: {k: spec[k] for k in KEYS if k in spec} for v, spec in sorted(versions.items())
            },
            "requirements_paths": MAP_REPO_TO_REQS_PATHS.get(repo, []),
            "environment_yml_paths": MAP_REPO_TO_ENV_YML_PATHS.get(repo, []),
        }
    data = {"source": f"swebench=={version('swebench')}", "repos": repos}
    out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(repos)} repositories to {out}")


if __name__ == "__main__":
    main()
