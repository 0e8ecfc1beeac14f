"""Real SWE-bench-style tasks without Docker: repository at ``base_commit`` + a uv env.

``patchgym datasets build-local`` drives :class:`LocalBuilder`; the tasks it writes run on
the local backend (isolated: the environment read-only, the working copy an overlay).
"""

from patchgym_envs.localbuild.build import (
    BuildReport,
    LocalBuildConfig,
    LocalBuilder,
    Outcome,
    local_task,
)
from patchgym_envs.localbuild.errors import BuildFailed, Unbuildable
from patchgym_envs.localbuild.network import network_failures
from patchgym_envs.localbuild.specs import EnvSpec, SpecTable, buildable, load_specs

__all__ = [
    "BuildFailed",
    "BuildReport",
    "EnvSpec",
    "LocalBuildConfig",
    "LocalBuilder",
    "Outcome",
    "SpecTable",
    "Unbuildable",
    "buildable",
    "load_specs",
    "local_task",
    "network_failures",
]
