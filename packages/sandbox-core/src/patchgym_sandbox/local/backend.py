"""The ``local`` backend: a copy-on-write working copy, run inside its own namespaces.

With ``isolation: bwrap`` (the default) each sandbox is one bubblewrap namespace set on a
minimal root whose PID 1 is the exec server (:mod:`patchgym_sandbox.serve` extended by
:mod:`patchgym_sandbox.nsinit`); every
command and shell runs through it, limits are cgroups and a size-limited tmpfs, and
``close()`` kills the namespace's init, which ends everything in it. With
``isolation: none`` commands are plain processes of this machine (no boundary).
Driver-side file operations go through :mod:`patchgym_sandbox.beneath` in both modes.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import posixpath
import shutil
import sys
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from patchgym_sandbox import beneath, seccomp
from patchgym_sandbox import labels as L
from patchgym_sandbox.backend import PrepareReport, SandboxBackend, SandboxInfo
from patchgym_sandbox.errors import ConfigError, IsolationUnavailable, SandboxLost
from patchgym_sandbox.local import (
    cgroups,
    clone_into,
    forks,
    gvisor,
    oomguard,
    records,
    rootless,
    serverpython,
    workcopy,
)
from patchgym_sandbox.local.config import LocalConfig
from patchgym_sandbox.local.isolation import (
    bwrap_argv,
    bwrap_path,
    filtered_etc,
    interpreter_paths,
    remove_etc,
)
from patchgym_sandbox.local.limits import preexec_for
from patchgym_sandbox.local.server import ServerConnection, launch
from patchgym_sandbox.local.shell import PtyChannel
from patchgym_sandbox.offload import run_blocking
from patchgym_sandbox.output import OutputCapture
from patchgym_sandbox.pool import start_all
from patchgym_sandbox.result import ExecResult
from patchgym_sandbox.sandbox import ExecRequest, Sandbox
from patchgym_sandbox.session import SHELL_ARGV, SHELL_ENV, ShellChannel
from patchgym_sandbox.spec import SandboxSpec
from patchgym_sandbox.supervisor import kill_tree, supervise

T = TypeVar("T")
SANDBOX_TOKEN = "PATCHGYM_SANDBOX"
NOT_RUN = {"exit_code": 127, "timed_out": False, "idle_timed_out": False, "duration_s": 0.0}
log = logging.getLogger("patchgym.sandbox.local")
_warned_unisolated = False


def _warn_unisolated() -> None:
    global _warned_unisolated
    if not _warned_unisolated:
        _warned_unisolated = True
        log.warning(
            "local sandbox with isolation: none — NO SECURITY BOUNDARY: commands run as "
            "plain processes of this machine with your privileges (they can read your keys, "
            "reach your services and outlive close()); use isolation: bwrap for any policy"
        )


class LocalBackend(SandboxBackend):
    name = "local"
    config: LocalConfig

    def __init__(self, config: LocalConfig) -> None:
        super().__init__(config)
        self.config.state_dir.mkdir(parents=True, exist_ok=True)
        self._executor: ThreadPoolExecutor | None = None
        self._overlay: bool | None = None
        self._lock = threading.Lock()
        self._etc: Path | None = None
        self.cgroups: cgroups.Layout | None = None
        """The host's cgroup layout, found once at start (v2: its subtree set up)."""
        self._views: dict[Path, Path] = {}
        self._mounts: list[Path] = []
        """The backend's own mounts (template views, /etc); unmounted by ``aclose`` or,
        for a backend dropped without it, when it is collected or the process exits."""
        weakref.finalize(self, _unmount_all, self._mounts)
        self._views_dir = config.state_dir / f"views-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        if config.isolation != "none":
            bwrap_path() if config.isolation == "bwrap" else gvisor.runsc_path()
            self.cgroups = cgroups.layout()
            log.debug("local backend: %s", self.cgroups.describe())
        else:
            _warn_unisolated()

    def provisioned_from(self, spec: SandboxSpec) -> str | None:
        return spec.template

    async def prepare(self, images: Sequence[str]) -> PrepareReport:
        """Template folders must exist on this machine (nothing is pulled)."""
        missing = {ref: "template folder not found" for ref in images if not Path(ref).is_dir()}
        return PrepareReport(present=[r for r in images if r not in missing], missing=missing)

    @property
    def isolated(self) -> bool:
        return self.config.isolation != "none"

    def executor(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.config.max_threads, "patchgym-local")
        return self._executor

    def use_overlay(self) -> bool:
        """Decided once per backend (sandboxes are provisioned from many threads at once)."""
        with self._lock:
            if self._overlay is None:
                mode = self.config.copy_mode
                self._overlay = mode == "overlay" or (
                    mode == "auto" and workcopy.overlay_supported(self.config.state_dir)
                )
            return self._overlay

    def etc_dir(self) -> Path:
        """This backend's filtered copy of /etc (built once, removed by ``aclose``)."""
        with self._lock:
            if self._etc is None:
                name = f"etc-{os.getpid()}-{uuid.uuid4().hex[:8]}"
                self._etc = filtered_etc(self.config.state_dir / name)
                self._mounts.append(self._etc)
            return self._etc

    @property
    def sandbox_uid(self) -> int | None:
        """Host uid of sandbox root (None: bubblewrap already runs as this unprivileged
        driver's uid, or no isolation)."""
        return rootless.SANDBOX_UID if self.isolated and os.geteuid() == 0 else None

    def template_view(self, template: Path) -> Path:
        """The template as the sandbox's root owns it: an idmapped read-only mount, made
        once per template and backend (see :mod:`patchgym_sandbox.local.rootless`)."""
        if self.sandbox_uid is None:
            return template
        with self._lock:
            view = self._views.get(template)
            if view is None:
                view = self._views_dir / str(len(self._views))
                view.mkdir(parents=True)
                try:
                    rootless.mount_idmapped(template, view, self.sandbox_uid)
                except OSError as exc:
                    raise IsolationUnavailable(
                        f"the template {template} cannot be shown to the unprivileged sandbox "
                        f"root ({exc}): rootless isolation needs idmapped mounts (Linux >= "
                        "5.19 for overlay over them, a filesystem that supports them: ext4, "
                        "xfs, btrfs, tmpfs); or opt out with isolation: none (no boundary)"
                    ) from exc
                self._mounts.append(view)
                self._views[template] = view
            return view

    def readonly_paths(self) -> list[Path]:
        cfg = self.config.readonly_paths
        return list(cfg) if cfg is not None else interpreter_paths()

    def python(self) -> str:
        """The exec server's interpreter: the config's, else the driver's own or, in a
        bubblewrap sandbox, a system one that starts the server faster (:mod:`.serverpython`)."""
        if self.config.python:
            return self.config.python
        driver = os.path.realpath(sys.executable)
        return serverpython.server_python(driver) if self.config.isolation == "bwrap" else driver

    def _make_sandbox(self, spec: SandboxSpec) -> LocalSandbox:
        return LocalSandbox(self, spec)

    async def list_sandboxes(self, labels: Mapping[str, str] | None = None) -> list[SandboxInfo]:
        recs = await asyncio.to_thread(records.read_all, self.config.state_dir)
        return [
            SandboxInfo(id=r.id, labels=r.labels, state="present")
            for r in recs
            if not labels or L.matches(r.labels, labels)
        ]

    async def remove(self, sandbox_id: str) -> None:
        await run_blocking(remove_sandbox, self.config.state_dir, sandbox_id)

    async def reap(
        self, labels: Mapping[str, str] | None = None, *, expired: bool = True
    ) -> list[str]:
        """Also removes fork snapshots nothing references any more (a driver killed mid-fork)
        and empty cgroups of sandboxes that are gone (a removal that gave up on a busy one)."""
        removed = await super().reap(labels, expired=expired)
        await asyncio.to_thread(forks.sweep, self.config.state_dir)
        state = self.config.state_dir
        await asyncio.to_thread(cgroups.sweep, lambda sid: not (state / sid).exists())
        await asyncio.to_thread(sweep_backend_mounts, state)
        return removed

    async def aclose(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        self._etc = None
        self._views = {}
        await run_blocking(_unmount_all, self._mounts)
        await run_blocking(shutil.rmtree, self._views_dir, ignore_errors=True)


def sweep_backend_mounts(state_dir: Path) -> list[Path]:
    """Unmount and remove the template views and ``/etc`` copies (``views-<pid>-*``,
    ``etc-<pid>-*``) of backends whose process is gone (a driver killed with SIGKILL)."""
    removed: list[Path] = []
    for entry in state_dir.glob("*-*-*"):
        kind, _, rest = entry.name.partition("-")
        pid = rest.split("-", 1)[0]
        if kind not in ("views", "etc") or not pid.isdigit() or forks.pid_alive(int(pid)):
            continue
        mounts = [*entry.iterdir()] if kind == "views" and entry.is_dir() else []
        _unmount_all([entry] if kind == "etc" else mounts)
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


_deferred: list[Path] = []
"""Mounts an :func:`_unmount_all` could not reach where it ran, for the next one."""
_deferred_lock = threading.Lock()


def _unmount_all(mounts: list[Path]) -> None:
    """Unmount ``mounts`` (emptying the list) and remove their mount points, in this
    process's mount namespace. A thread with mounts of its own (a launcher in its staging
    namespace, where a garbage collection may run a dropped backend's finalizer) would
    only reach its own copies, and the host's mounts would stay for good (seen: a test's
    backend, never closed, left its ``/etc`` tmpfs and template view in most full runs):
    there they wait for the next call from anywhere else, which any sandbox's close, any
    ``aclose`` and the process's exit make."""
    if not mounts and not _deferred:  # a close's check: nothing left over, no /proc read
        return
    with _deferred_lock:
        if not _in_process_namespace():
            _deferred.extend(mounts)
            mounts.clear()
            return
        mounts.extend(_deferred)
        _deferred.clear()
    while mounts:
        remove_etc(mounts.pop())  # unmount, then remove the (now empty) mount point


def _in_process_namespace() -> bool:
    """Whether this thread sees this process's mount namespace (its main thread's)."""
    try:
        here, main = os.stat("/proc/thread-self/ns/mnt"), os.stat("/proc/self/ns/mnt")
    except OSError:
        return True
    return (here.st_dev, here.st_ino) == (main.st_dev, main.st_ino)


atexit.register(_unmount_all, [])


def remove_sandbox(state_dir: Path, sandbox_id: str) -> None:
    """Kill every process of the sandbox, unmount and delete its directory."""
    base = state_dir / sandbox_id
    rec = records.read(state_dir, sandbox_id)
    groups = [Path(d) for d in rec.cgroups] if rec else []
    cgroups.remove(groups)  # kills what is left inside first
    if not groups:  # isolation none (or no pids controller): find them by token
        kill_tree(None, SANDBOX_TOKEN, sandbox_id)
    for m in [*(rec.mounts if rec else []), str(base / "root")]:
        workcopy.unmount(Path(m))
    workcopy.remove_tree(base)
    if rec is not None and rec.snapshot is not None:
        forks.drop_ref(Path(rec.snapshot), sandbox_id)


class LocalSandbox(Sandbox):
    backend_name = "local"

    def __init__(self, backend: LocalBackend, spec: SandboxSpec) -> None:
        super().__init__(spec)
        self._backend = backend
        self._base = backend.config.state_dir / self.id
        self._root = self._base / "root"
        self._tmp = self._base / "tmp"
        self._isolated = backend.isolated
        self._channels: list[ShellChannel] = []
        self._server: ServerConnection | None = None
        self._groups: list[Path] = []
        self._upper: Path | None = None
        self._snapshot: forks.Snapshot | None = None
        """Set on a fork's children before start: the snapshot they start from."""

    # -- paths: inside the sandbox vs on this machine ---------------------------
    @property
    def workdir(self) -> str:
        return posixpath.normpath(self.spec.workdir) if self._isolated else str(self._root)

    @property
    def host_root(self) -> Path:
        """The working copy on this machine (equal to ``workdir`` without isolation)."""
        return self._root

    @property
    def host_tmp(self) -> Path:
        """The sandbox's private /tmp (TMPDIR) on this machine."""
        return self._tmp

    @property
    def cgroup_dirs(self) -> list[Path]:
        """The sandbox's cgroups (isolated only): a process placed there is limited like
        its commands and killed by ``close()``, however it detached itself."""
        return list(self._groups)

    def file_roots(self) -> Sequence[str]:
        return (self.workdir, "/tmp") if self._isolated else (str(self._base),)

    def _host(self, path: str) -> tuple[Path, str]:
        """(a trusted directory on this machine, the path beneath it) for a sandbox path."""
        if not self._isolated:
            return self._base, posixpath.relpath(path, str(self._base))
        for inside, outside in ((self.workdir, self._root), ("/tmp", self._tmp)):
            if path == inside or path.startswith(inside.rstrip("/") + "/"):
                return outside, path[len(inside) :].lstrip("/")
        raise AssertionError(path)  # resolve() already refused it

    # -- lifecycle ---------------------------------------------------------------
    async def _start(self) -> None:
        if self.spec.user is not None:
            raise ConfigError("the local backend cannot switch users; leave `user` unset")
        if self.spec.network and self._backend.config.isolation == "gvisor":
            raise ConfigError("`network`: isolation: gvisor sandboxes have none; use bwrap")
        template = Path(self.spec.template).resolve() if self.spec.template else None
        if template is not None and not template.is_dir():
            raise ConfigError(f"local template {self.spec.template!r} is not a directory")
        await asyncio.to_thread(self._provision, template)

    def _provision(self, template: Path | None) -> None:
        state_dir = self._backend.config.state_dir
        self._base.mkdir(parents=True)
        rec = records.Record(id=self.id, root=str(self._root), labels=self.spec.all_labels(self.id))
        uid = self._backend.sandbox_uid
        disk_mb = self.spec.resources.disk_mb if self._isolated else None
        space = self._base
        if disk_mb or uid is not None:  # a tmpfs: /tmp's mount names no host path
            space = self._base / "disk"
            rec.mounts.append(str(space))  # recorded before it exists: removal skips it then
        records.write(state_dir, rec)
        if space != self._base:
            space.mkdir()
            workcopy.mount_tmpfs(space, disk_mb)
            self._tmp = space / "tmp"
        for d in (self._tmp, self._base / "home"):
            d.mkdir()
            if uid is not None:
                rootless.own(d, uid)
        lowers = self._lowers(template)
        if lowers and self._backend.use_overlay():
            upper, work = space / "upper", space / "ovl-work"
            for d in (self._root, upper, work):
                d.mkdir()
            if uid is not None:
                rootless.own(upper, uid)
                os.chmod(upper, lowers[-1].stat().st_mode & 0o7777)
            workcopy.mount_overlay(lowers, upper, work, self._root, names_under=self._base)
            self._upper = upper
            rec.mounted = True
            rec.mounts.insert(0, str(self._root))
        else:
            self._root = space / "root"
            rec.root = str(self._root)
            if not lowers:
                self._root.mkdir()
                if uid is not None:
                    rootless.own(self._root, uid)
            else:
                workcopy.copy_tree(lowers[0], self._root)
        if self._snapshot is not None:
            rec.snapshot = str(self._snapshot.path)
            for name, mine in (("tmp", self._tmp), ("home", self._base / "home")):
                workcopy.copy_tree(self._snapshot.part(name), mine)
        try:
            if self._isolated:
                self._groups = cgroups.create(self.id, self.spec.resources)
                rec.cgroups = [str(g) for g in self._groups]
        finally:  # one write for the mounts, the snapshot and the groups, whatever failed
            records.write(state_dir, rec)
        if self._isolated:
            self._server = self._launch(self._groups)
            oomguard.protect(self._server.init_pid)

    def _lowers(self, template: Path | None) -> list[Path]:
        """What the working copy starts from, top first: a fork's snapshot, the template."""
        snap = self._snapshot
        if snap is None:
            return [self._backend.template_view(template)] if template is not None else []
        beneath = [template] if snap.layered and template is not None else []
        return [snap.part("root"), *map(self._backend.template_view, beneath)]

    def _launch(self, groups: list[Path]) -> ServerConnection:
        res = self.spec.resources
        uid = self._backend.sandbox_uid
        paths = [p for p in [*self._backend.readonly_paths(), *map(Path, self.spec.mounts)]
                 if p.exists()]  # fmt: skip
        gvisor_mode = self._backend.config.isolation == "gvisor"
        bundle = self._base / "gvisor"
        sources = [self._backend.etc_dir(), self._tmp, self._root, *paths]
        if gvisor_mode:
            sources.append(bundle)
        staged = rootless.staged_paths(sources) if uid is not None else sources
        readonly = list(zip(staged[3 : 3 + len(paths)], paths, strict=True))
        filter_fd = seccomp.bpf_fd()
        loader = () if gvisor_mode else oomguard.loader_fds(self._backend.python())
        # the working copies of every open sandbox: staged, bubblewrap needs none of them
        detach = [] if gvisor_mode else [self._backend.config.state_dir.resolve()]
        # and every host mount it has no use for, but where bubblewrap itself lives
        keep = None if gvisor_mode else [os.path.dirname(os.path.realpath(bwrap_path()))]

        def preexec() -> None:
            """Still root: private staging mounts, into the cgroups before any namespace
            exists (so the cgroup namespace's root is the sandbox's own group), then the
            sandbox's uid for good."""
            if uid is not None:
                rootless.private_mounts(sources, detach, keep)
            if uid is not None or gvisor_mode:
                cgroups.add(groups, os.getpid())
            if uid is not None:
                rootless.become(uid)

        @contextlib.contextmanager
        def placed_thread() -> Iterator[None]:
            """The same, done to the launching thread (bubblewrap inherits it) where cgroup
            v1 moves threads: no Python in the child, no global cgroup lock, and (where the
            thread can take the sandbox's uid itself) a ``vfork``, not a copy of the driver.
            The thread leaves the groups once bubblewrap started (before anything reads
            them)."""
            back = cgroups.enter(groups)
            try:
                rootless.private_mounts(sources, detach, keep)
                same = nullcontext()
                with same if thread_uid is None else rootless.thread_identity(thread_uid):
                    yield
            finally:
                cgroups.enter(back)

        threaded = uid is not None and not gvisor_mode and cgroups.threads_movable()
        thread_uid = uid if threaded and rootless.thread_identity_supported() else None
        # cgroup v2: born in its group (clone3), no cgroup.procs write after the start
        born_in = (
            uid is not None and not gvisor_mode and not threaded and len(groups) == 1
            and clone_into.supported() and rootless.thread_identity_supported()
        )  # fmt: skip

        @contextlib.contextmanager
        def staging_thread() -> Iterator[None]:
            """The launching thread's own staging mounts; the child is born in the sandbox's
            group and takes the sandbox's uid before its exec (:mod:`.clone_into`)."""
            rootless.private_mounts(sources, detach, keep)
            yield

        etc, tmp, root, workdir = staged[0], staged[1], staged[2], self.workdir
        placed = uid is not None and not gvisor_mode

        def argv_for(info: int, block: int | None, command: list[str]) -> list[str]:
            if not gvisor_mode:
                return [*bwrap_argv(etc=etc, readonly=readonly, root=root, workdir=workdir,
                                    tmp=tmp, network=self.spec.network, info_fd=info,
                                    block_fd=block, seccomp_fd=filter_fd),
                        *oomguard.guarded(command)]  # fmt: skip
            config = gvisor.spec(argv=command, env=self._env({}), etc=etc, readonly=readonly,
                                 root=root, workdir=workdir, tmp=tmp)  # fmt: skip
            gvisor.write_bundle(bundle, config, uid)
            return gvisor.reaped(
                info, gvisor.runsc_argv(bundle=staged[-1], sandbox_id=self.id), uid
            )

        try:
            return launch(
                argv_for,
                python=self._backend.python(),
                env=self._env({}),
                rlimits={"RLIMIT_CPU": res.cpu_time_s} if res.cpu_time_s else {},
                # as root, preexec or prepare placed bubblewrap (so the init) in the groups already
                on_init=None if placed else lambda pid: cgroups.add(groups, pid),
                sandbox_id=self.id,
                log=self._base / "isolation.log",
                preexec_fn=None if threaded or born_in else preexec,
                around=placed_thread if threaded else staging_thread if born_in else None,
                cgroup_dir=groups[0] if born_in else None,
                born_uid=uid if born_in else None,
                user=uid if threaded and thread_uid is None else None,
                pass_fds=(filter_fd, *loader),
                precompiled=not gvisor_mode,
            )
        finally:
            os.close(filter_fd)

    async def _close(self) -> None:
        for chan in self._channels:
            await chan.close()
        self._channels.clear()
        if self._server is not None:
            self._server.detach()
        await run_blocking(self._teardown)

    def _teardown(self) -> None:
        """Kill the server (everything in the namespace), then remove the rest: one
        thread hop for both."""
        if self._server is not None:
            self._server.kill()
        remove_sandbox(self._backend.config.state_dir, self.id)
        _unmount_all([])  # what a finalizer had to leave (a pool thread sees the host's)

    async def _fork(self, spec: SandboxSpec, n: int) -> list[Sandbox]:
        """Children over one copy of this sandbox's writable state (see ``local.forks``)."""
        self._check_alive()
        children = [self._backend.sandbox(spec) for _ in range(n)]
        # over a template alone the upper is the whole difference; over a snapshot (a fork
        # of a fork) the merged view is copied, so a snapshot never depends on another
        upper = self._upper if self._snapshot is None else None
        parts = {"root": upper or self._root, "tmp": self._tmp, "home": self._base / "home"}
        snap = await asyncio.to_thread(
            forks.take,
            self._backend.config.state_dir,
            parts,
            layered=upper is not None,
            children=[c.id for c in children],
        )
        for child in children:
            assert isinstance(child, LocalSandbox)
            child._snapshot = snap
        try:
            return await start_all(children)
        finally:
            # children that never started hold their reference still; the last drop removes it
            unstarted = [c.id for c in children if not c.started]
            await asyncio.to_thread(forks.drop_refs, snap.path, unstarted)

    async def _renew(self, lease_s: float) -> None:
        rec = records.read(self._backend.config.state_dir, self.id)
        if rec is not None:
            rec.labels[L.EXPIRES_AT] = str(L.expires_at(lease_s))
            records.write(self._backend.config.state_dir, rec)

    # -- commands ----------------------------------------------------------------
    def _env(self, extra: Mapping[str, str]) -> dict[str, str]:
        tmp = "/tmp" if self._isolated else str(self._tmp)
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": tmp if self._isolated else str(self._base / "home"),
            "TMPDIR": tmp,
            "TERM": "dumb",
            SANDBOX_TOKEN: self.id,
        }
        env.update(extra)
        return env

    def _check_alive(self) -> None:
        if not self._base.is_dir():
            raise SandboxLost(f"local sandbox {self.id} was removed from outside (reaped?)")

    async def _exec(self, req: ExecRequest) -> ExecResult:
        self._check_alive()
        if req.user is not None:
            raise ConfigError("the local backend cannot switch users; leave `user` unset")
        if self._server is not None:
            return await self._server.run(req)
        capture = OutputCapture(req.max_output_bytes)
        where = self._host(req.cwd)
        run = partial(
            supervise,
            req.cmd,
            capture.feed,
            cwd=req.cwd,
            env=self._env(req.env),
            timeout=req.timeout,
            idle_timeout=req.idle_timeout,
            stdin=req.stdin,
            preexec_fn=preexec_for(self.spec.resources),
        )

        def checked() -> dict[str, object] | None:
            """The command, in the executor's thread with the check of its ``cwd`` (one
            thread hop per command, not two)."""
            return run() if beneath.is_dir(*where) else None

        status = await asyncio.get_running_loop().run_in_executor(self._backend.executor(), checked)
        if status is None:
            msg = f"patchgym: working directory {req.cwd} does not exist\n".encode()
            capture.feed(2, msg)
            return capture.result(NOT_RUN)
        return capture.result(status)

    async def _open_shell(self, cwd: str, env: Mapping[str, str]) -> ShellChannel:
        self._check_alive()
        if self._server is not None:
            chan = await self._server.open_shell(SHELL_ARGV, cwd, {**self._env(env), **SHELL_ENV})
        else:
            chan = await PtyChannel.spawn(cwd, self._env(env))
        self._channels.append(chan)
        return chan

    # -- files: resolved beneath the sandbox's directories, never through its links ------
    def _as_root_inside(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a file operation with the file rights of the sandbox's root (its host uid):
        what the driver writes belongs to it, what it reads is what that root could. The
        trusted ``root`` is opened first, as the driver (its ancestors may be closed to
        that uid), and handed over as its descriptor."""
        uid = self._backend.sandbox_uid
        if uid is None:
            return fn(*args)
        root: Path = args[0]
        fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            with rootless.as_user(uid):
                return fn(Path(f"/proc/self/fd/{fd}"), *args[1:])
        finally:
            os.close(fd)

    async def _write_file(self, path: str, data: bytes, mode: int) -> None:
        self._check_alive()
        root, rel = self._host(path)
        await asyncio.to_thread(self._as_root_inside, beneath.write_file, root, rel, data, mode)

    async def _read_file(self, path: str, max_bytes: int) -> bytes:
        self._check_alive()
        root, rel = self._host(path)
        return await asyncio.to_thread(
            self._as_root_inside, beneath.read_file, root, rel, max_bytes
        )

    async def _put_archive(self, dest_dir: str, data: bytes) -> None:
        self._check_alive()
        root, rel = self._host(dest_dir)
        await asyncio.to_thread(self._as_root_inside, beneath.unpack, root, rel, data)

    async def _get_archive(self, path: str) -> bytes:
        self._check_alive()
        root, rel = self._host(path)
        name = posixpath.basename(path.rstrip("/")) or "root"
        return await asyncio.to_thread(self._as_root_inside, beneath.pack, root, rel, name)
