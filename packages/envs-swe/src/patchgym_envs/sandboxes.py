"""A task's sandbox: spec from the task, setup commands, patches in and out.

Everything goes through the sandbox protocol (``exec`` / files), so it works the same on
every backend. The local backend has no image: it copies the task's template, and takes
``python3`` from the host's PATH, so :func:`spec_for` puts the chosen interpreter's folder
first on PATH there (default: ``sys.executable``, which has pytest).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from patchgym_envs import rowpaths
from patchgym_envs.bundled import TEMPLATE_PREFIX, resolve_template
from patchgym_envs.errors import SetupFailed
from patchgym_envs.grading import CLEAN_CONFIG, GIT, TAMPERED, tampered
from patchgym_envs.runnerbytecode import compile_runner
from patchgym_envs.task import Task
from patchgym_sandbox import (
    ExecResult,
    Resources,
    Sandbox,
    SandboxBackend,
    SandboxLost,
    SandboxSpec,
)

DEFAULT_RESOURCES = Resources(memory_mb=4096, pids=1024, disk_mb=4096)
"""What an episode's sandbox may use unless the env config says otherwise: 4 GiB of
memory, 1,024 processes, 4 GiB written on top of the repository (on the local backend the
disk is a tmpfs, so written bytes also count as memory)."""

GRADER_HEADROOM_MB = 256
"""Memory a grading sandbox has beyond anything the patch's processes can fill with files:
room for the exec server, the test runner and its output capture (see
:func:`grading_resources`)."""


def grading_resources(res: Resources) -> Resources:
    """The limits of a fresh grading sandbox: the episode's, with the memory limit raised to
    ``max(memory_mb, disk_mb) + GRADER_HEADROOM_MB``.

    On the local backend the disk is a tmpfs whose pages count as memory and belong to no
    process: a patch that fills ``/tmp`` while the tests run would otherwise push the
    sandbox to its memory limit, and the OOM killer, finding no process that owns the
    pages, could end the sandbox's init (the whole grading). With the headroom the fill
    stops at ``disk_mb`` (ENOSPC, a failing test) and the headroom stays free for the
    grader; an anonymous-memory hog is then the largest process in the sandbox and the
    one the OOM killer ends (a failing test, not a lost sandbox). Without a memory limit
    there is nothing to raise; without ``disk_mb`` the disk is not capped below memory
    and only the episode's memory is raised."""
    if res.memory_mb is None:
        return res
    memory = max(res.memory_mb, res.disk_mb or 0) + GRADER_HEADROOM_MB
    return res.model_copy(update={"memory_mb": memory})


DIFF_EXCLUDES = ("':(exclude,glob)**/__pycache__/**'", "':(exclude,glob)**/*.pyc'")


def local_path(python: str | None = None) -> str:
    """PATH for local sandboxes: the interpreter's folder, then the host PATH."""
    folder = os.path.dirname(os.path.abspath(python or sys.executable))
    return folder + os.pathsep + os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")


def borrows_this_interpreter(python: str | None) -> bool:
    """Local sandboxes given ``python`` run this process's interpreter (and its pytest)."""
    here = os.path.dirname(os.path.abspath(sys.executable))
    return python is None or os.path.dirname(os.path.abspath(python)) == here


def local_mounts(task: Task, roots: Sequence[Path]) -> list[str]:
    """A locally built task's environment and the interpreter it runs from (``patchgym
    datasets build-local``); the environment must lie beneath a data root (``rowpaths``)."""
    env = task.metadata.get("local_env") or {}
    if not isinstance(env, Mapping) or not env.get("path"):
        return []
    field = "metadata.local_env.path"
    path = env.get("path")
    if not isinstance(path, str):
        raise rowpaths.RowPathError(task.id, field, f"{path!r} is not a path")
    folder = rowpaths.resolve(task.id, field, path, roots)
    base = rowpaths.venv_base_prefix(folder)
    if base is None:
        raise rowpaths.RowPathError(task.id, field, f"{path!r} is not a virtualenv (no pyvenv.cfg)")
    return [str(folder), base]


def local_template(task: Task, roots: Sequence[Path]) -> str | None:
    """The task's template folder on this machine: bundled, or beneath a data root."""
    template = task.template
    if template is None:
        return None
    if template.startswith(TEMPLATE_PREFIX):
        return resolve_template(template)
    return str(rowpaths.resolve(task.id, "template", template, roots))


def spec_for(
    task: Task,
    backend: SandboxBackend,
    *,
    python: str | None = None,
    labels: Mapping[str, str] | None = None,
    run_id: str | None = None,
    rollout_id: str | None = None,
    lease_s: float | None = None,
    resources: Resources | None = None,
    data_roots: Sequence[str] = (),
) -> SandboxSpec:
    """The sandbox spec of ``task``. On the local backend the row's paths (``template``,
    ``metadata.local_env.path``) must lie beneath a data root (:mod:`rowpaths`, roots from
    ``data_roots``): a :class:`~patchgym_envs.rowpaths.RowPathError` names the row and field."""
    env = dict(task.env)
    local = backend.name == "local"
    roots = rowpaths.data_roots(data_roots) if local else []
    if local:
        env.setdefault("PATH", local_path(python))
        if borrows_this_interpreter(python):
            compile_runner()  # once per process: see patchgym_envs.runnerbytecode
        template = local_template(task, roots)
    else:  # other backends start from the image; a template is a local folder
        template = None if (task.template or "").startswith(TEMPLATE_PREFIX) else task.template
    fields: dict[str, object] = {
        "image": task.image,
        "template": template,
        "workdir": task.workdir,
        "env": env,
        "labels": dict(labels or {}),
        "run_id": run_id,
        "rollout_id": rollout_id,
        "resources": resources if resources is not None else DEFAULT_RESOURCES,
        "mounts": local_mounts(task, roots) if local else [],
    }
    if lease_s is not None:
        fields["lease_s"] = lease_s
    return SandboxSpec.model_validate(fields)


async def run_setup(sandbox: Sandbox, task: Task, *, timeout: float) -> None:
    """Run the task's setup commands; a failure is :class:`SetupFailed` (an InfraError)."""
    for cmd in task.setup_commands:
        res = await sandbox.exec(cmd, timeout=timeout)
        if not res.ok:
            raise SetupFailed(
                f"setup command {cmd!r} of task {task.id} failed (exit {res.exit_code}): "
                f"{res.output[-1000:].strip()}"
            )


PROBE = "patchgym-alive"


async def ensure_alive(sandbox: Sandbox) -> None:
    """Raise :class:`SandboxLost` unless the sandbox still runs commands in its workdir.

    Grading brackets itself with this probe: a sandbox removed from outside must end as an
    infrastructure error, not as a graded 0 (some backends answer a command in a deleted
    sandbox with an ordinary non-zero exit).
    """
    res = await sandbox.exec(f"echo {PROBE}", timeout=60)
    if res.stdout.strip() != PROBE:
        raise _lost(sandbox, res)


def _lost(sandbox: Sandbox, res: ExecResult) -> SandboxLost:
    return SandboxLost(
        f"sandbox {sandbox.id} did not answer the liveness probe (exit {res.exit_code}): "
        f"{res.output.strip()[-300:]}"
    )


async def apply_patch(sandbox: Sandbox, patch: str) -> tuple[bool, str]:
    """``git apply`` a patch in the workdir; (applied, output)."""
    if not patch.strip():
        return True, ""
    text = patch if patch.endswith("\n") else patch + "\n"
    res = await sandbox.exec(
        f"{GIT} apply --binary --whitespace=nowarn -v -",
        stdin=text,
        timeout=120,
    )
    return res.ok, res.output


def _diff_command(base_commit: str | None, *, restore_index: bool = True) -> str:
    """Stage everything, diff the index against the base; ``restore_index``: unstage
    again (a ``git`` run that only a sandbox used afterwards needs)."""
    base = base_commit or "HEAD"
    diff = (
        f"{GIT} add -A -- . {' '.join(DIFF_EXCLUDES)} >/dev/null 2>&1; "
        f"{GIT} -c core.fileMode=true diff --no-ext-diff --no-textconv --cached --binary "
        f"--src-prefix=a/ --dst-prefix=b/ {base}"
    )
    return f"{diff}; rc=$?; {GIT} reset -q >/dev/null 2>&1; exit $rc" if restore_index else diff


async def current_patch(sandbox: Sandbox, base_commit: str | None = None, *, timeout: float) -> str:
    """The agent's changes as a binary-safe git diff against ``base_commit`` (or HEAD).

    Tracked and untracked files, deletions and mode changes are included; ignored files,
    ``__pycache__`` and ``.pyc`` are not.

    New files are staged only for the diff and unstaged again, so grading still sees them
    as untracked (and removes a planted ``conftest.py``).
    """
    res = await sandbox.exec(_diff_command(base_commit), timeout=timeout)
    return res.stdout


async def clean_patch(
    sandbox: Sandbox, base_commit: str | None = None, *, timeout: float, closing: bool = False
) -> tuple[bool, str]:
    """Check the sandbox is alive (as :func:`ensure_alive`), reset the repository's git
    config to its format keys, then take :func:`current_patch`, in one exec:
    (tampered, patch).

    A sandbox that does not answer the liveness line first raises :class:`SandboxLost`
    (never an empty patch graded 0). ``tampered``: the config carried commands (filters,
    hooks, ``diff.external``, fsmonitor ...), a hack flag. The reset runs first, so the
    agent's config can neither run code nor decide which diff is extracted. ``closing``:
    the sandbox is closed next (graded elsewhere), so the new files stay staged (one
    ``git`` run less: nothing reads that index again).
    """
    diff = _diff_command(base_commit, restore_index=not closing)
    res = await sandbox.exec(
        f"echo {PROBE}\n( {CLEAN_CONFIG} ) </dev/null\n{diff}",
        timeout=timeout,
    )
    alive, newline, stdout = res.stdout.partition("\n")
    if alive != PROBE or not newline:
        raise _lost(sandbox, res)
    _, marker, rest = stdout.partition(f"{TAMPERED}=")
    if not marker:  # not a repository: CLEAN_CONFIG printed nothing
        return False, stdout
    state, _, patch = rest.partition("\n")
    return tampered(marker + state), patch
