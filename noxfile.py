"""One session per package, each in its own environment synced from uv.lock.

    uv run nox                 # everything CI runs (lint, typecheck, tests, dists)
    uv run nox -s tests-rewards
    uv run nox -l              # list sessions

A tests session syncs only its member plus that member's ``test`` dependency group, so an
import of something the member does not declare fails there, not in production.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv"
nox.options.error_on_missing_interpreters = True

ROOT = Path(__file__).parent
PYTHON = "3.11"

# member -> (path, distribution, import name, extra `uv sync` args)
MEMBERS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "sandbox-core": (
        "packages/sandbox-core",
        "patchgym-sandbox-core",
        "patchgym_sandbox",
        ("--extra", "testing"),
    ),
    "sandbox-docker": ("packages/sandbox-docker", "patchgym-sandbox-docker", "patchgym_docker", ()),
    "sandbox-k8s": ("packages/sandbox-k8s", "patchgym-sandbox-k8s", "patchgym_k8s", ()),
    "sandbox-ags": (
        "packages/sandbox-ags",
        "patchgym-sandbox-ags",
        "patchgym_ags",
        ("--group", "e2b-latest", "--extra", "standin", "--extra", "tools"),
    ),
    "rewards": ("packages/rewards", "patchgym-rewards", "patchgym_rewards", ()),
    "envs-swe": ("packages/envs-swe", "patchgym-envs-swe", "patchgym_envs", ()),
    "agents": ("packages/agents", "patchgym-agents", "patchgym_agents", ()),
    "trainer": ("apps/trainer", "patchgym-trainer", "patchgym_trainer", ("--extra", "cpu")),
}
TYPECHECK_EXTRAS: dict[str, tuple[str, ...]] = {
    # patchgym_sandbox.tracing is checked against OpenTelemetry's own types (optional extra)
    "sandbox-core": ("--extra", "otel"),
}
TYPE_STUBS = ("types-PyYAML", "types-docker")
"""Stub packages for what ships no types (PyYAML: envs-swe's localbuild reads YAML; the
Docker SDK: sandbox-docker)."""


def sync(session: nox.Session, dist: str, *args: str) -> None:
    """``uv sync`` one member (no other member's dev tools) into this session's venv."""
    session.run_install(
        "uv", "sync", "--locked", "--package", dist, "--no-default-groups", *args,
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
        external=True,
    )  # fmt: skip


PHASE2_DIRS: dict[str, tuple[str, ...]] = {"trainer": ("k8s",)}
"""Test folders a member's ``tests-<member>`` session leaves to ``tests-<member>-k8s``: they
need the Kubernetes cluster, which ``.ci/run`` starts in its background lane."""

WAITING: dict[str, tuple[str, ...]] = {"trainer": ("test_build_local_pydicom_network.py",)}
"""Test files a member's ``tests-<member>`` session leaves to ``tests-<member>-waiting``:
they spend minutes waiting, not computing (pydicom's download retries, ~3.5 min a run of
its test file, with no network), so ``.ci/run`` runs them in its background lane beside
the busy sessions instead of in line with them."""


def _tests(member: str) -> None:
    path, dist, _, extra = MEMBERS[member]

    def tests(session: nox.Session) -> None:
        sync(session, dist, "--group", "test", *extra)
        tests_dir = ROOT / path / "tests"
        leave = PHASE2_DIRS.get(member, ()) + WAITING.get(member, ())
        ignore = [f"--ignore={tests_dir / sub}" for sub in leave]
        code = session.run(
            "python", "-m", "pytest", str(tests_dir), "-p", "no:cacheprovider", *ignore,
            *session.posargs, success_codes=[0, 5],
        )  # fmt: skip
        if code == 5 or code is False:
            session.log(f"{member}: no tests collected (pytest exit 5), treated as success")

    tests.__doc__ = f"pytest {path}/tests, with only {dist} and its test group installed"
    nox.session(name=f"tests-{member}", python=PYTHON)(tests)


def _typecheck(member: str) -> None:
    path, dist, module, extra = MEMBERS[member]

    def typecheck(session: nox.Session) -> None:
        """mypy as the root pyproject.toml configures it (strict; named untyped modules only)."""
        sync(session, dist, *extra, *TYPECHECK_EXTRAS.get(member, ()))
        session.install("mypy>=1.13", *TYPE_STUBS)
        session.run(
            "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--no-incremental",
            "-p", module, env={"MYPYPATH": str(ROOT / path / "src")},
        )  # fmt: skip

    typecheck.__doc__ = f"mypy --strict on {module} ({path}/src)"
    nox.session(name=f"typecheck-{member}", python=PYTHON)(typecheck)


def _waiting(member: str) -> None:
    path, dist, _, extra = MEMBERS[member]
    files = [str(ROOT / path / "tests" / name) for name in WAITING[member]]

    def waiting(session: nox.Session) -> None:
        sync(session, dist, "--group", "test", *extra)
        session.run("python", "-m", "pytest", *files, "-p", "no:cacheprovider", *session.posargs)

    waiting.__doc__ = f"the waiting tests of {path}/tests ({', '.join(WAITING[member])})"
    nox.session(name=f"tests-{member}-waiting", python=PYTHON)(waiting)


for _member in MEMBERS:
    _tests(_member)
    _typecheck(_member)
for _member in WAITING:
    _waiting(_member)


@nox.session(name="tests-sandbox-ags-e2b-legacy", python=PYTHON)
def tests_ags_legacy(session: nox.Session) -> None:
    """The ags/e2b backend through the last e2b SDK that creates with POST /sandboxes (2.50)."""
    sync(session, "patchgym-sandbox-ags", "--group", "test", "--group", "e2b-legacy")
    session.run(
        "python", "-m", "pytest", str(ROOT / "packages/sandbox-ags/tests"), "-p", "no:cacheprovider"
    )


@nox.session(name="tests-trainer-k8s", python=PYTHON)
def tests_trainer_k8s(session: nox.Session) -> None:
    """``datasets build-local --for k8s`` then ``validate sandbox=k8s`` on a real row: needs
    a cluster ($KUBECONFIG; .ci/run runs it in its lane B, with tests-sandbox-k8s)."""
    sync(session, "patchgym-trainer", "--group", "test", "--extra", "cpu")
    session.run(
        "python", "-m", "pytest", str(ROOT / "apps/trainer/tests/k8s"), "-p", "no:cacheprovider",
        *session.posargs,
    )  # fmt: skip


@nox.session(name="tests-cgroup-v2", python=PYTHON)
def tests_cgroup_v2(session: nox.Session) -> None:
    """The local backend's cgroup tests and bwrap security suite on a cgroup v2-only kernel.

    This machine is cgroup v1 (hybrid); most users' hosts are v2. ci/engines/cgv2-guest.sh
    boots Debian's kernel in qemu (KVM when it works, else TCG: this machine's KVM is PVM,
    which runs no Debian kernel) with an init that mounts only cgroup2, on this host's root
    shared read-only, and runs pytest there with this session's environment; the session
    fails with pytest's exit status. Other tests: ``nox -s tests-cgroup-v2 -- -q PATHS``."""
    sync(session, "patchgym-sandbox-core", "--group", "test", "--extra", "testing")
    python = str(Path(session.virtualenv.location) / "bin" / "python")
    session.run(
        "bash", str(ROOT / "ci/engines/cgv2-guest.sh"), python, *session.posargs, external=True
    )


STRESS_SUITES: dict[str, tuple[str, ...]] = {
    "sandbox-core": (
        "tests/test_local_conformance.py::TestLocalOverlay",
        "tests/test_local_security.py::TestLocalSecurity",
    ),
    "sandbox-docker": (
        "tests/test_docker_conformance.py::TestDockerConformance",
        "tests/test_docker_security_suite.py",
    ),
    "sandbox-ags": (
        "tests/test_conformance.py::TestE2bStandin",
        "tests/test_security.py",
    ),
}
"""Per member, the suites the ``stress`` session runs (its default configuration only)."""


@nox.session(python=PYTHON)
def stress(session: nox.Session) -> None:
    """The conformance and security suites of local, docker and the e2b stand-in while
    `stress-ng --cpu 2` keeps both cores busy: no outcome may depend on an idle machine."""
    stress_ng = shutil.which("stress-ng")
    if stress_ng is None:
        session.error("stress-ng is not installed (Debian: apt-get install stress-ng)")
    envs = Path(session.virtualenv.location)
    load = subprocess.Popen([stress_ng, "--cpu", "2", "--timeout", "3600s", "--quiet"])
    try:
        for member, suites in STRESS_SUITES.items():
            path, dist, _, extra = MEMBERS[member]
            venv = envs / f"member-{member}"
            session.run_install(
                "uv", "sync", "--locked", "--package", dist, "--no-default-groups",
                "--group", "test", *extra,
                env={"UV_PROJECT_ENVIRONMENT": str(venv)}, external=True,
            )  # fmt: skip
            session.run(
                str(venv / "bin" / "python"), "-m", "pytest", "-p", "no:cacheprovider",
                *(f"{ROOT / path}/{suite}" for suite in suites), *session.posargs,
                external=True,
            )  # fmt: skip
    finally:
        load.terminate()
        load.wait(timeout=60)


@nox.session(python=PYTHON)
def notebook(session: nox.Session) -> None:
    """Execute examples/walkthrough.ipynb end to end (a failing cell fails the session)."""
    sync(session, "patchgym-trainer", "--group", "notebook", "--extra", "cpu")
    session.run("python", "-m", "pytest", str(ROOT / "examples"), "-p", "no:cacheprovider", "-v")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff format --check and ruff check over the whole repository."""
    session.install("ruff>=0.8")
    session.run("ruff", "format", "--check", ".")
    session.run("ruff", "check", ".")


@nox.session(python=PYTHON)
def dists(session: nox.Session) -> None:
    """Build every member without workspace sources; install each wheel outside the workspace.

    The only proof that the version ranges between members are true.
    """
    out = Path(tempfile.mkdtemp(prefix="patchgym-dists-"))
    try:
        for _, dist, _, _ in MEMBERS.values():
            session.run(
                "uv",
                "build",
                "--package",
                dist,
                "--no-sources",
                "--wheel",
                "--out-dir",
                str(out),
                external=True,
            )
        for member, (_, dist, module, _) in MEMBERS.items():
            venv = out / f"venv-{member}"
            session.run("uv", "venv", "-q", "--python", PYTHON, str(venv), external=True)
            py = str(venv / "bin" / "python")
            wanted = [dist]
            if member == "trainer":
                # Name the CPU wheel itself: with only a find-links folder uv prefers PyPI's
                # CUDA build of the same version.
                wanted = [
                    f"{dist}[cpu]",
                    *map(str, Path("/opt/wheels").glob("torch-2.13.0+cpu-*.whl")),
                ]
            session.run(
                "uv", "pip", "install", "-q", "--python", py, "--find-links", str(out), *wanted,
                external=True,
            )  # fmt: skip
            check = f"import {module}; print('{dist}', {module}.__version__)"
            if member.startswith("sandbox-") and member != "sandbox-core":
                name = {"sandbox-docker": "docker", "sandbox-k8s": "k8s", "sandbox-ags": "ags"}[
                    member
                ]
                check += (
                    "; from patchgym_sandbox import available_backends as a; "
                    f"assert '{name}' in a(), a(); print('  backends:', a())"
                )
            session.run(py, "-c", check, external=True, env={"PYTHONPATH": ""})
    finally:
        shutil.rmtree(out, ignore_errors=True)


@nox.session(name="e2e_cpu", python=PYTHON, default=False)
def e2e_cpu(session: nox.Session) -> None:
    """Tiny random Qwen2 behind an OpenAI-compatible server on CPU; `patchgym rollout` on two bundled tasks."""
    sync(session, "patchgym-trainer", "--extra", "cpu")
    session.run("python", "apps/trainer/scripts/e2e_cpu.py", *session.posargs)


@nox.session(name="train_cpu", python=PYTHON)
def train_cpu(session: nox.Session) -> None:
    """One real GRPO step on CPU (TRL, `patchgym train preset=cpu_smoke`), rewards from graded episodes."""
    sync(session, "patchgym-trainer", "--extra", "cpu")
    session.run("python", "apps/trainer/scripts/train_cpu.py", *session.posargs)


@nox.session(name="benches", python=PYTHON)
def benches(session: nox.Session) -> None:
    """Every bench in bench/ at a tiny size (bench/tests): they run, whatever they print."""
    session.run_install(
        "uv", "sync", "--locked", "--all-packages", "--extra", "cpu", "--extra", "standin",
        "--extra", "tools", "--group", "e2b-latest", "--group", "test",
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
        external=True,
    )  # fmt: skip
    session.install("rich", "mini-swe-agent", "swe-rex")
    session.run("python", "-m", "pytest", "bench/tests", "-p", "no:cacheprovider", "-v")


@nox.session(name="bench_sandbox", python=PYTHON, default=False)
def bench_sandbox(session: nox.Session) -> None:
    """bench/sandbox_exec.py with mini-swe-agent and SWE-ReX installed in this env only."""
    sync(session, "patchgym-sandbox-core")
    session.install("rich", "mini-swe-agent", "swe-rex")
    session.run(
        "python", "bench/sandbox_exec.py", *session.posargs, env={"MSWEA_SILENT_STARTUP": "1"}
    )
