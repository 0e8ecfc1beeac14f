"""Content-addressed test environments built with uv, pinned in time.

An environment is keyed by (repository, spec, interpreter, resolution date): every task of
a repository whose spec, ``--python`` and date are equal shares one. Every requirement the
spec does not pin resolves as of that date (uv's ``--exclude-newer``), the repository's
own ``pip install`` included (run through uv with the same date), so a row from 2020 gets
the pytest of 2020, not today's. It is built in place under a lock and counts as built only once its
``env.json`` record exists, so an interrupted build is removed and redone, never used.
The repository's own install (``pip install -e .``) runs against the first task's
template; its paths are then rewritten to the task ``workdir`` (where the working copy is
mounted inside an isolated sandbox), so the editable install serves every task's copy.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

from pydantic import BaseModel, Field

from patchgym_envs.localbuild.errors import BuildFailed
from patchgym_envs.localbuild.pythons import find_python, prefix_of
from patchgym_envs.localbuild.specs import EnvSpec

RECORD = "env.json"
CONDA_PIN = re.compile(r"^([A-Za-z0-9_.\-\[\]]+)=([^=<>!].*)$")
EXACT_PIN = re.compile(r"^([A-Za-z0-9_.\-\[\]]+)\s*===?\s*[^,;]+$")
PIP_INSTALL = re.compile(r"\b(?:python3?\s+-m\s+)?pip3?\s+install\b")
FAR_FUTURE = "2999-01-01T00:00:00Z"
SEED = ("pip", "setuptools", "wheel")
REWRITE_GLOBS = ("*.pth", "*.egg-link", "__editable__*.py", "*.dist-info/direct_url.json")


class EnvInfo(BaseModel):
    key: str
    path: str
    python: str
    """The interpreter inside the environment."""
    base_prefix: str
    """The installation the interpreter runs from (bound read-only into sandboxes)."""
    build_s: float
    disk_bytes: int
    as_of: str | None = None
    """Unpinned requirements resolved as of this instant (None: today's releases)."""
    packages: dict[str, str] = Field(default_factory=dict)
    """What the environment resolved to (``uv pip freeze``): name -> version or source."""


def env_key(spec: EnvSpec, repo: str, python: str, as_of: str | None) -> str:
    """Content address: repository, spec, the interpreter's ``major.minor`` and the date."""
    blob = json.dumps({"spec": spec.key(repo), "python": python, "as_of": as_of}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def pinned_names(requirements: list[str]) -> list[str]:
    """Names the spec pins exactly (``name==x``): they keep their pin whatever the date."""
    return [m.group(1).split("[")[0] for r in requirements if (m := EXACT_PIN.match(r.strip()))]


def date_args(as_of: str | None, pinned: list[str]) -> list[str]:
    if as_of is None:
        return []
    return [
        "--exclude-newer",
        as_of,
        *(a for n in pinned for a in ("--exclude-newer-package", f"{n}={FAR_FUTURE}")),
    ]


def pip_names(packages: str) -> list[str]:
    """A conda-style package list as pip requirements (``numpy=1.19`` -> ``numpy==1.19``)."""
    out = []
    for item in packages.split():
        m = CONDA_PIN.match(item)
        out.append(f"{m.group(1)}=={m.group(2)}" if m else item)
    return out


def disk_usage(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            p = os.path.join(root, name)
            if not os.path.islink(p):
                total += os.lstat(p).st_size
    return total


class EnvBuilder:
    def __init__(self, root: Path, *, python_override: str | None = None) -> None:
        self.root = root / "envs"
        self.python_override = python_override

    def python_version(self, spec: EnvSpec) -> str:
        return self.python_override or spec.python

    def python_for(self, spec: EnvSpec) -> str:
        return find_python(self.python_version(spec))

    def key(self, spec: EnvSpec, repo: str, as_of: str | None) -> str:
        return env_key(spec, repo, self.python_version(spec), as_of)

    def get(self, key: str) -> EnvInfo | None:
        record = self.root / key / RECORD
        return EnvInfo.model_validate_json(record.read_text()) if record.is_file() else None

    def build(
        self, spec: EnvSpec, repo: str, template: Path, workdir: str, as_of: str | None = None
    ) -> EnvInfo:
        key = self.key(spec, repo, as_of)
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            done = self.get(key)
            if done is not None:
                return done
            path = self.root / key
            shutil.rmtree(path, ignore_errors=True)  # an interrupted build, never used
            try:
                return self._build(spec, key, path, template, workdir, as_of)
            except BaseException:
                shutil.rmtree(path, ignore_errors=True)
                raise

    def _build(
        self,
        spec: EnvSpec,
        key: str,
        path: Path,
        template: Path,
        workdir: str,
        as_of: str | None,
    ) -> EnvInfo:
        t0 = time.monotonic()
        base = self.python_for(spec)
        listed = pip_names(spec.packages) if spec.packages.strip() != "requirements.txt" else []
        dated = date_args(as_of, pinned_names([*listed, *spec.pip_packages]))
        seed = [] if dated else ["--seed"]
        run(["uv", "venv", "-q", *seed, "--python", base, str(path)], "uv venv")
        python = str(path / "bin" / "python")
        if dated:  # the era's pip/setuptools (today's setuptools has no pkg_resources)
            uv_pip(python, *dated, *SEED)
        if spec.packages.strip() == "requirements.txt":
            reqs = [template / p for p in spec.requirements_paths if (template / p).is_file()]
            if not reqs:
                raise BuildFailed(f"none of {spec.requirements_paths} exists in the repository")
            uv_pip(python, *dated, "-r", str(reqs[0]), cwd=template)
        elif listed:
            uv_pip(python, *dated, *listed)
        if spec.pip_packages:
            uv_pip(python, *dated, *spec.pip_packages)
        for cmd in (*spec.pre_install, spec.install, *spec.post_install):
            if cmd.strip():
                shell(dated_pip(cmd, python, dated), path, template)
        relocate(path, str(template), workdir)
        info = EnvInfo(
            key=key,
            path=str(path),
            python=python,
            base_prefix=prefix_of(python),
            build_s=round(time.monotonic() - t0, 2),
            disk_bytes=disk_usage(path),
            as_of=as_of,
            packages=freeze(python),
        )
        (path / RECORD).write_text(info.model_dump_json(indent=1))
        return info


def build_env_vars(env_path: Path) -> dict[str, str]:
    """Environment for commands run with ``env_path`` activated; pip ignores host config."""
    out = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV"))}
    out.update(
        PATH=f"{env_path}/bin:{os.environ.get('PATH', '/usr/bin:/bin')}",
        VIRTUAL_ENV=str(env_path),
        PIP_CONFIG_FILE=os.devnull,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTHONNOUSERSITE="1",
    )
    return out


def run(
    argv: list[str], what: str, *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> None:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise BuildFailed(f"{what} failed (exit {done.returncode}): {' | '.join(tail)}")


def uv_pip(python: str, *args: str, cwd: Path | None = None) -> None:
    run(
        ["uv", "pip", "install", "-q", "--python", python, *args],
        f"uv pip install {' '.join(args)[:120]}",
        cwd=cwd,
    )


def shell(cmd: str, env_path: Path, cwd: Path) -> None:
    run(["bash", "-c", cmd], repr(cmd.strip()[:120]), cwd=cwd, env=build_env_vars(env_path))


def dated_pip(cmd: str, python: str, dated: list[str]) -> str:
    """``pip install`` in a spec command, run by uv with the same resolution date; only the
    build tools (setuptools, wheel) are today's, so a 2020 ``setup.py`` builds editable
    (PEP 660) while the environment keeps its era's setuptools at run time."""
    if not dated:
        return cmd
    build_tools = [a for t in SEED[1:] for a in ("--exclude-newer-package", f"{t}={FAR_FUTURE}")]
    uv = " ".join(["uv pip install --python", shlex.quote(python), *dated, *build_tools])
    return PIP_INSTALL.sub(uv, cmd)


def freeze(python: str) -> dict[str, str]:
    done = subprocess.run(
        ["uv", "pip", "freeze", "--python", python], capture_output=True, text=True, check=False
    )
    out: dict[str, str] = {}
    for line in done.stdout.splitlines():
        name, sep, version = line.partition("==")
        if not sep:
            name, _, version = line.partition(" @ ")
        out[name.strip()] = version.strip()
    return out


def relocate(env_path: Path, old: str, new: str) -> None:
    """Point editable installs at ``new`` (the sandbox workdir) instead of the build checkout."""
    for site in env_path.glob("lib/python*/site-packages"):
        for pattern in REWRITE_GLOBS:
            for f in site.glob(pattern):
                text = f.read_text(errors="surrogateescape")
                if old in text:
                    f.write_text(text.replace(old, new), errors="surrogateescape")
