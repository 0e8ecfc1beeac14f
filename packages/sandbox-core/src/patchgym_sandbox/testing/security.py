"""The security section of the conformance suite: attacks a hostile policy runs as root.

Every test is one attack, run from inside the sandbox (or planted there and then handed
to the driver's file API), asserting it fails: nothing outside the sandbox is read or
written, the driver's environment and host services stay out of reach, nothing outlives
``close()``, and limits hold. Subclass :class:`SandboxSecurity` next to
:class:`~patchgym_sandbox.testing.SandboxConformance` with the same two fixtures
(``backend_config``, ``sandbox_spec``). A backend whose engine cannot prevent an attack
names it in :attr:`SandboxSecurity.cannot_prevent` with the reason; that test is then
skipped with that reason. The default is that every attack must fail.

Checks are made from this machine (the driver's side): a planted secret must not come
back, a host file must not change, a host process must not survive. Backends whose
sandboxes run on another machine pass those checks vacuously and say so in their README.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import socket
import sys
import sysconfig
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from patchgym_sandbox.backend import SandboxBackend
from patchgym_sandbox.errors import SandboxError
from patchgym_sandbox.sandbox import Sandbox
from patchgym_sandbox.spec import Resources, SandboxSpec
from patchgym_sandbox.testing.security_files import FileAttacks
from patchgym_sandbox.testing.security_init import InitAttacks
from patchgym_sandbox.testing.suite import BackendSuite

SECRET_VAR = "PATCHGYM_SECURITY_SECRET"
FORK_RACE_TRIES = 8
FILE_API_REFUSALS = (SandboxError, OSError)
"""What the driver's file API may raise instead of following a planted link."""


def host_processes_with(marker: str) -> list[int]:
    """Pids on this machine whose command line or environment contains ``marker``."""
    needle = marker.encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        for part in ("cmdline", "environ"):
            try:
                if needle in Path(f"/proc/{name}/{part}").read_bytes():
                    found.append(int(name))
                    break
            except OSError:
                continue
    return found


def _wait_gone(marker: str, within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while host_processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)


class _Listener:
    """A server on this machine that hands ``secret`` to whoever connects; counts accepts."""

    def __init__(self, sock: socket.socket, secret: bytes) -> None:
        self.sock = sock
        self.secret = secret
        self.accepted = 0
        sock.listen(8)
        sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            with contextlib.suppress(OSError), conn:
                conn.sendall(self.secret + b"\n")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


def _tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
    return h.hexdigest()


class SandboxSecurity(FileAttacks, InitAttacks, BackendSuite):
    """Attacks from inside as root; each must fail. See the module docstring."""

    run_id: ClassVar[str] = "security"
    cannot_prevent: ClassVar[Mapping[str, str]] = {}
    """Attack (test name without ``test_``) -> why this backend's engine cannot stop it."""
    memory_limit_mb: ClassVar[int] = 256
    pids_limit: ClassVar[int] = 64
    proc_cgroup_lists_groups: ClassVar[bool] = True
    """False where ``/proc/self/cgroup`` is empty inside (gVisor: no cgroup of this machine
    is visible at all); the test then checks only that no host path shows."""
    disk_limit_mb: ClassVar[int] = 64

    # -- fixtures --------------------------------------------------------------------
    @pytest.fixture
    def driver_secret(self, monkeypatch: pytest.MonkeyPatch) -> str:
        """A credential in the driver's environment before any sandbox exists."""
        secret = "pg-secret-" + uuid.uuid4().hex
        monkeypatch.setenv(SECRET_VAR, secret)
        return secret

    @pytest.fixture
    def before_backend(self, driver_secret: str) -> None:
        """The secret is planted before the backend (and so any sandbox) is built."""

    @pytest.fixture
    def host_secret(self, tmp_path: Path) -> Iterator[tuple[Path, str]]:
        """A file on this machine, outside every sandbox, holding a secret."""
        secret = "pg-host-file-" + uuid.uuid4().hex
        path = tmp_path / "host-secret.txt"
        path.write_text(secret + "\n")
        yield path, secret

    def attack(self, name: str) -> None:
        if name in self.cannot_prevent:
            pytest.skip(f"{type(self).__name__} cannot prevent {name}: {self.cannot_prevent[name]}")

    # -- outside the working copy ----------------------------------------------------
    @pytest.mark.asyncio
    async def test_write_outside_working_copy(self, sb: Sandbox, tmp_path: Path) -> None:
        self.attack("write_outside_working_copy")
        nonce = uuid.uuid4().hex
        site = Path(sysconfig.get_paths()["purelib"])
        targets = [tmp_path / f"pwned-{nonce}", site / f"pg-pwned-{nonce}.pth"]
        try:
            for t in targets:
                up = "../" * 12
                await sb.exec(
                    f"echo 'import os' > {t}; echo pwned > {sb.workdir}/{up}{str(t).lstrip('/')}; "
                    f"mkdir -p {t.parent} 2>/dev/null; echo pwned > {t}",
                    timeout=30,
                )
                assert not t.exists(), f"a command inside the sandbox wrote {t} on this machine"
        finally:
            for t in targets:
                with contextlib.suppress(OSError):
                    t.unlink()

    @pytest.mark.asyncio
    async def test_read_outside_working_copy(
        self, sb: Sandbox, host_secret: tuple[Path, str]
    ) -> None:
        self.attack("read_outside_working_copy")
        path, secret = host_secret
        up = "../" * 12
        r = await sb.exec(f"cat {path}; cat {sb.workdir}/{up}{str(path).lstrip('/')}", timeout=30)
        assert secret not in r.output, "a command inside the sandbox read a file of this machine"

    @pytest.mark.asyncio
    async def test_file_api_does_not_follow_planted_links_out(
        self, sb: Sandbox, host_secret: tuple[Path, str], driver_secret: str, tmp_path: Path
    ) -> None:
        self.attack("file_api_follows_links")
        path, secret = host_secret
        outside = tmp_path / "outside"
        outside.mkdir()
        r = await sb.exec(
            f"ln -s {path} file-link; ln -s {outside} dir-link; ln -s / root-link; "
            "ln -s /proc/self/environ env-link; ln -s /proc/self/root self-root; "
            f"mkdir -p sub && ln -s ../../../../../../../../{str(path).lstrip('/')} sub/up-link",
            timeout=30,
        )
        assert r.exit_code == 0, r.output
        reads = [
            "file-link", "env-link", "sub/up-link", f"root-link{path}", f"self-root{path}",
            "self-root/proc/self/environ", f"{sb.workdir}/file-link",
        ]  # fmt: skip
        for name in reads:
            for how in ("read_file", "get_archive"):
                with contextlib.suppress(*FILE_API_REFUSALS):
                    data = await getattr(sb, how)(name)
                    assert secret.encode() not in data, f"{how}({name!r}) read this machine's file"
                    assert driver_secret.encode() not in data, (
                        f"{how}({name!r}) read the driver's env"
                    )
            dest = tmp_path / f"dl-{uuid.uuid4().hex}"
            with contextlib.suppress(*FILE_API_REFUSALS):
                await sb.download(name, dest)
            for f in [dest, *dest.rglob("*")] if dest.exists() else []:
                if f.is_file():
                    body = f.read_bytes()
                    assert secret.encode() not in body and driver_secret.encode() not in body
        src = tmp_path / "upload-src"
        src.mkdir()
        (src / "planted.txt").write_text("pwned\n")
        writes = {
            "file-link": path,
            "dir-link/new.txt": outside / "new.txt",
            f"root-link{outside}/abs.txt": outside / "abs.txt",
            "sub/up-link": path,
        }
        for name, victim in writes.items():
            with contextlib.suppress(*FILE_API_REFUSALS):
                await sb.write_file(name, "pwned\n")
            assert not victim.exists() or victim.read_text() != "pwned\n", (
                f"write_file({name!r}) wrote {victim} on this machine"
            )
        for target in ("dir-link", f"root-link{outside}"):
            with contextlib.suppress(*FILE_API_REFUSALS):
                await sb.upload(src, target)
            with contextlib.suppress(*FILE_API_REFUSALS):
                await sb.upload(src / "planted.txt", f"{target}/one.txt")
        assert list(outside.iterdir()) == [], "upload followed a planted link out of the sandbox"
        assert path.read_text() == secret + "\n"

    # -- the driver and this machine ---------------------------------------------------
    @pytest.mark.asyncio
    async def test_read_driver_environment(self, sb: Sandbox, driver_secret: str) -> None:
        self.attack("read_driver_environment")
        r = await sb.exec(
            "env; cat /proc/$PPID/environ; cat /proc/1/environ; "
            "for f in /proc/[0-9]*/environ /proc/[0-9]*/task/*/environ; do cat $f; done; "
            "cat /proc/[0-9]*/cmdline",
            timeout=60,
        )
        assert driver_secret not in r.output, "the driver's environment is readable inside"

    @pytest.mark.asyncio
    async def test_reach_host_loopback(self, sb: Sandbox) -> None:
        self.attack("reach_host_loopback")
        secret = uuid.uuid4().hex.encode()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        listener = _Listener(sock, secret)
        try:
            r = await sb.exec(
                f"(exec 3<>/dev/tcp/127.0.0.1/{port} && cat <&3) 2>&1; "
                f"python3 -c \"import socket; print(socket.create_connection(('127.0.0.1', {port}), 3).recv(99))\"; "
                f"python3 -c \"import socket; print(socket.create_connection(('localhost', {port}), 3).recv(99))\"",
                timeout=60,
            )
        finally:
            listener.close()
        assert secret.decode() not in r.output and listener.accepted == 0, (
            f"a server on this machine's loopback (port {port}) was reached from inside"
        )

    @pytest.mark.asyncio
    async def test_connect_engine_sockets(self, sb: Sandbox, tmp_path: Path) -> None:
        self.attack("connect_engine_sockets")
        secret = uuid.uuid4().hex.encode()
        base = Path("/run") if os.access("/run", os.W_OK) else tmp_path
        path = base / f"pg-sec-{uuid.uuid4().hex[:8]}.sock"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))
        listener = _Listener(sock, secret)
        probe = (
            "import socket, sys\n"
            "for p in sys.argv[1:]:\n"
            "    try:\n"
            "        s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect(p)\n"
            "        s.sendall(b'GET /version HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n'); print(p, s.recv(4096))\n"
            "    except OSError as e:\n"
            "        print(p, 'refused', e)\n"
        )
        try:
            await sb.write_file("/tmp/pg-probe.py", probe)
            r = await sb.exec(
                f"python3 /tmp/pg-probe.py {path} /var/run/docker.sock /run/docker.sock "
                "/run/containerd/containerd.sock /var/run/dbus/system_bus_socket",
                timeout=60,
            )
        finally:
            listener.close()
            with contextlib.suppress(OSError):
                path.unlink()
        assert listener.accepted == 0 and secret.decode() not in r.output, (
            f"a Unix socket of this machine ({path}) accepted a connection from inside"
        )
        assert "ApiVersion" not in r.output, "the container engine's socket answered from inside"

    @pytest.mark.asyncio
    async def test_kill_driver(self, sb: Sandbox) -> None:
        self.attack("kill_driver")
        me = os.getpid()
        await sb.exec(f"kill -9 {me}; kill -9 $PPID; kill -9 1", timeout=30)
        await asyncio.sleep(0.2)
        assert Path(f"/proc/{me}").exists()  # we are still here, or this line never runs
        r = await sb.exec("echo still-here", timeout=60)
        assert r.stdout == "still-here\n", "killing processes from inside broke the sandbox"

    @pytest.mark.asyncio
    async def test_leave_its_cgroups(self, sb: Sandbox) -> None:
        """Root inside moves itself into another cgroup (out of its memory, process and CPU
        groups, and out of the removal that kills by group), or mounts a hierarchy to do so."""
        self.attack("leave_cgroups")
        r = await sb.exec(
            "for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/*/cgroup.procs "
            '/sys/fs/cgroup/*/*/cgroup.procs; do [ -e "$f" ] && (echo $$ > "$f") 2>/dev/null '
            '&& echo "MOVED $f"; done; mkdir -p /tmp/pgcg; '
            "mount -t cgroup -o pids none /tmp/pgcg 2>/dev/null && echo MOUNTED; "
            "mount -t cgroup2 none /tmp/pgcg 2>/dev/null && echo MOUNTED; true",
            timeout=60,
        )
        assert "MOVED" not in r.stdout and "MOUNTED" not in r.stdout, r.stdout

    @pytest.mark.asyncio
    async def test_outlive_close(self, backend: SandboxBackend, sandbox_spec: SandboxSpec) -> None:
        self.attack("outlive_close")
        marker = "pgsurvivor" + uuid.uuid4().hex[:12]
        daemon = (
            "import os, time\n"
            "if os.fork(): os._exit(0)\n"
            "os.setsid()\n"
            "if os.fork(): os._exit(0)\n"
            "for fd in (0, 1, 2): os.close(fd)\n"
            f"os.execve('/bin/bash', ['/bin/bash', '-c', 'exec -a {marker} sleep 1000'], {{}})\n"
        )
        async with backend.sandbox(sandbox_spec, run_id="security") as s:
            await s.write_file("/tmp/pg-daemon.py", daemon)
            await s.exec(
                f"env -i setsid nohup bash -c 'exec -a {marker} sleep 1000' >/dev/null 2>&1 & "
                f"(setsid bash -c '(exec -a {marker} sleep 1000 &)' &) ; "
                "env -i python3 /tmp/pg-daemon.py; sleep 0.5",
                timeout=30,
            )
        await asyncio.to_thread(_wait_gone, marker, 10.0)
        assert host_processes_with(marker) == [], "processes started inside outlived close()"

    # -- limits --------------------------------------------------------------------------
    def _limited(self, spec: SandboxSpec, **res: int) -> SandboxSpec:
        merged = {**spec.resources.model_dump(exclude_none=True), **res}
        return spec.model_copy(update={"resources": Resources(**merged)})

    @pytest.mark.asyncio
    async def test_exceed_memory(self, backend: SandboxBackend, sandbox_spec: SandboxSpec) -> None:
        self.attack("exceed_memory")
        mb = self.memory_limit_mb
        hog = (
            f'python3 -c "b = bytearray({mb * 4} * 1024 * 1024); '
            "[b.__setitem__(i, 1) for i in range(0, len(b), 4096)]; print('allocated')\""
        )
        async with backend.sandbox(self._limited(sandbox_spec, memory_mb=mb)) as s:
            r = await s.exec(hog, timeout=120)
            assert "allocated" not in r.stdout, f"{mb * 4} MiB allocated under a {mb} MiB limit"
            assert (await s.exec("echo alive", timeout=60)).stdout == "alive\n"

    @pytest.mark.asyncio
    async def test_exceed_process_count(
        self, backend: SandboxBackend, sandbox_spec: SandboxSpec
    ) -> None:
        self.attack("exceed_process_count")
        n = self.pids_limit
        bomb = (
            "import os, time\n"
            "n = 0\n"
            f"for _ in range({n * 4}):\n"
            "    try:\n"
            "        pid = os.fork()\n"
            "    except OSError:\n"
            "        break\n"
            "    if pid == 0:\n"
            "        os.close(1); os.close(2); time.sleep(30); os._exit(0)\n"
            "    n += 1\n"
            "print('forked', n, flush=True)\n"
        )
        async with backend.sandbox(self._limited(sandbox_spec, pids=n)) as s:
            await s.write_file("/tmp/pg-bomb.py", bomb)
            r = await s.exec("python3 /tmp/pg-bomb.py", timeout=120)
            got = [int(w) for w in r.stdout.split() if w.isdigit()]
            assert got and got[0] < n, f"{got} processes started under a limit of {n}: {r.output}"
            assert (await s.exec("echo alive", timeout=60)).stdout == "alive\n"

    @pytest.mark.asyncio
    async def test_exceed_disk(self, backend: SandboxBackend, sandbox_spec: SandboxSpec) -> None:
        self.attack("exceed_disk")
        mb = self.disk_limit_mb
        fill = (
            f"for i in 1 2 3 4; do head -c {mb}M /dev/zero > big$i 2>/dev/null; "
            f"head -c {mb}M /dev/zero > /tmp/big$i 2>/dev/null; done; "
            "cat big* /tmp/big* 2>/dev/null | wc -c"
        )
        async with backend.sandbox(self._limited(sandbox_spec, disk_mb=mb)) as s:
            r = await s.exec(fill, timeout=300)
            written = int(r.stdout.split()[-1]) if r.stdout.split() else 0
            assert written <= mb * 1024 * 1024 * 1.25, (
                f"{written >> 20} MiB stored under a {mb} MiB disk limit"
            )
            await s.exec("rm -f big* /tmp/big*", timeout=60)
            assert (await s.exec("echo alive > ok.txt && cat ok.txt", timeout=60)).ok

    # -- the template and other sandboxes ---------------------------------------------------
    @pytest.mark.asyncio
    async def test_change_template_or_another_sandbox(
        self, backend: SandboxBackend, sandbox_spec: SandboxSpec
    ) -> None:
        self.attack("change_template_or_another_sandbox")
        template = Path(sandbox_spec.template) if sandbox_spec.template else None
        before = _tree_digest(template) if template and template.is_dir() else None
        marker = "pg-victim-" + uuid.uuid4().hex[:12]
        async with (
            backend.sandbox(sandbox_spec, run_id="security") as victim,
            backend.sandbox(sandbox_spec, run_id="security") as attacker,
        ):
            await victim.write_file(marker, "intact\n")
            host_paths = [str(template)] if template else []
            root = getattr(victim, "host_root", None)
            if root is not None:
                host_paths.append(str(root))
            attack = " ".join(
                f"echo pwned > {p}/{marker}; echo pwned > {p}/pwned.txt; rm -rf {p}/* 2>/dev/null;"
                for p in host_paths
            )
            await attacker.exec(
                f"{attack} for f in $(find / -xdev -name '{marker}' 2>/dev/null); do "
                "echo pwned > $f; done; rm -rf ./* ./.[!.]* 2>/dev/null; echo pwned > pwned.txt",
                timeout=120,
            )
            assert await victim.read_file(marker) == b"intact\n", "one sandbox changed another"
            assert not (await victim.exec("test -e pwned.txt", timeout=60)).ok
        if template is not None and before is not None:
            assert _tree_digest(template) == before, "a sandbox changed its template"
        async with backend.sandbox(sandbox_spec, run_id="security") as fresh:
            assert not (await fresh.exec("test -e pwned.txt", timeout=60)).ok

    @pytest.mark.asyncio
    async def test_read_shadow_and_root_home(self, sb: Sandbox, tmp_path: Path) -> None:
        self.attack("read_shadow_and_root_home")
        secret = "pg-root-home-" + uuid.uuid4().hex
        planted = Path("/root") / f".pg-sec-{uuid.uuid4().hex[:8]}"
        plant = os.access("/root", os.W_OK)
        if plant:
            planted.write_text(secret + "\n")
        try:
            r = await sb.exec(
                f"cat /etc/shadow /etc/gshadow; ls -la /root; cat {planted}; cat /root/.pg-sec-*",
                timeout=60,
            )
        finally:
            if plant:
                planted.unlink()
        assert secret not in r.output, "a file in this machine's /root was read from inside"
        try:
            shadow = Path("/etc/shadow").read_text()
        except OSError:
            return
        hashed = [
            ln
            for ln in shadow.splitlines()
            if ln.split(":")[1:2] not in (["*"], ["!"], ["!*"], [""])
        ]
        for line in hashed:
            assert line not in r.output, "this machine's /etc/shadow was read from inside"
        if shadow.strip() and sys.platform == "linux":
            assert shadow not in r.output, "this machine's /etc/shadow was read from inside"

    # -- the kernel boundary: uid mapping, sysctls, seccomp, /proc, host paths -------------
    @pytest.mark.asyncio
    async def test_sandbox_root_is_not_host_root(self, sb: Sandbox) -> None:
        """Root inside must be an unprivileged uid of this machine (checked from here, on
        the process itself, when it runs on this machine; on the processes that run the
        sandbox, when a user-space kernel runs its processes; else from its uid_map)."""
        self.attack("sandbox_root_is_host_root")
        marker = "pguidprobe" + uuid.uuid4().hex[:12]
        await sb.exec(f"(exec -a {marker} sleep 120 &) ; true", timeout=30)
        try:
            deadline = time.monotonic() + 10
            pids = host_processes_with(marker)
            while not pids and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                pids = host_processes_with(marker)
            if pids:
                for pid in pids:
                    with contextlib.suppress(OSError):
                        status = Path(f"/proc/{pid}/status").read_text()
                        uids = next(ln for ln in status.splitlines() if ln.startswith("Uid:"))
                        assert set(uids.split()[1:]) != {"0"} and "0" not in uids.split()[1:], (
                            f"a process of sandbox root runs as root on this machine: {uids}"
                        )
                return
            runtime = host_processes_with(sb.id)  # a user-space kernel (gVisor) running it
            if runtime:
                for pid in runtime:
                    with contextlib.suppress(OSError):
                        status = Path(f"/proc/{pid}/status").read_text()
                        uids = next(ln for ln in status.splitlines() if ln.startswith("Uid:"))
                        assert "0" not in uids.split()[1:], (
                            f"the runtime of sandbox {sb.id} runs as root here: {uids}"
                        )
                return
            r = await sb.exec("cat /proc/self/uid_map", timeout=30)
            first = r.stdout.split()
            assert first[:3] != ["0", "0", "4294967295"], (
                f"sandbox root is this machine's root (uid_map {r.stdout.strip()!r})"
            )
        finally:
            await sb.exec(f"pkill -f {marker}; true", timeout=30)

    @pytest.mark.asyncio
    async def test_write_host_kernel_state(self, sb: Sandbox) -> None:
        """core_pattern pipes a crash dump to a program run as host root; modprobe names
        the program the kernel runs as root for an unknown module. Neither may change."""
        self.attack("write_host_kernel_state")
        nonce = uuid.uuid4().hex[:8]
        targets = ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe")
        before = {t: Path(t).read_text() for t in targets if Path(t).exists()}
        script = (
            "import sys\n"
            "for path, value in [(p, v) for p, v in zip(sys.argv[1::2], sys.argv[2::2])]:\n"
            "    try:\n"
            "        open(path, 'w').write(value)\n"
            "        print('WROTE', path)\n"
            "    except OSError as e:\n"
            "        print('refused', path, e)\n"
        )
        try:
            await sb.write_file("/tmp/pg-sysctl.py", script)
            r = await sb.exec(
                f"python3 /tmp/pg-sysctl.py {targets[0]} '|/tmp/pg-{nonce} %p' "
                f"{targets[1]} /tmp/pg-{nonce} /proc/sys/kernel/sysrq 0; "
                f"sysctl -w kernel.core_pattern='|/tmp/pg-{nonce}' 2>&1; true",
                timeout=60,
            )
            after = {t: Path(t).read_text() for t in before}
        finally:
            for t, value in before.items():  # undo a successful attack before failing
                if Path(t).read_text() != value:
                    Path(t).write_text(value)
        assert after == before, f"a write from inside changed this machine's kernel state: {after}"
        assert "WROTE /proc/sys/kernel" not in r.stdout, r.output

    @pytest.mark.asyncio
    async def test_dangerous_system_calls(self, sb: Sandbox) -> None:
        """Docker's default seccomp denials: keyrings, io_uring, bpf, perf, mounts, new
        namespaces, ptrace of another process, kernel modules, userfaultfd."""
        self.attack("dangerous_system_calls")
        from patchgym_sandbox.seccomp import _NR

        names = ("keyctl", "add_key", "request_key", "io_uring_setup", "bpf",
                 "perf_event_open", "unshare", "setns", "mount", "open_tree", "fsopen",
                 "init_module", "finit_module", "kexec_load", "userfaultfd", "ptrace",
                 "process_vm_readv", "open_by_handle_at", "pivot_root", "syslog")  # fmt: skip
        table = {arch: {n: _NR[n][i] for n in names if _NR[n][i] is not None}
                 for i, arch in enumerate(("x86_64", "aarch64"))}  # fmt: skip
        args = {"keyctl": (0, -3), "add_key": (0, 0, 0, 0, -3), "unshare": (0x10000000,),
                "io_uring_setup": (4, 0), "bpf": (0, 0, 0), "perf_event_open": (0, 0, -1, -1, 0),
                "fsopen": (0, 0), "open_tree": (-100, 0, 0), "userfaultfd": (0,),
                "syslog": (3, 0, 0), "ptrace": (16, "VICTIM", 0, 0)}  # fmt: skip
        probe = (
            "import ctypes, errno, json, os, sys, time\n"
            "libc = ctypes.CDLL(None, use_errno=True); libc.syscall.restype = ctypes.c_long\n"
            f"table = {table!r}[os.uname().machine]\n"
            f"args = {args!r}\n"
            "victim = os.fork()\n"
            "if victim == 0:\n"
            "    time.sleep(60); os._exit(0)\n"
            "for name, nr in sorted(table.items()):\n"
            "    a = [victim if x == 'VICTIM' else x for x in args.get(name, (0, 0, 0))]\n"
            "    r = libc.syscall(nr, *[ctypes.c_long(x) for x in a])\n"
            "    e = ctypes.get_errno()\n"
            "    print(name, 'ALLOWED' if r >= 0 or e not in (errno.EPERM, errno.EACCES, errno.ENOSYS) else 'denied', r, errno.errorcode.get(e))\n"
            "os.kill(victim, 9)\n"
        )
        await sb.write_file("/tmp/pg-sys.py", probe)
        r = await sb.exec("python3 /tmp/pg-sys.py; unshare -U true && echo UNSHARED", timeout=60)
        allowed = [ln for ln in r.stdout.splitlines() if "ALLOWED" in ln or "UNSHARED" in ln]
        assert r.stdout.count(" denied ") >= 10, r.output
        assert not allowed, f"system calls a sandbox must not make went through: {allowed}"

    @pytest.mark.asyncio
    async def test_read_masked_proc_paths(self, sb: Sandbox) -> None:
        """The OCI runtime spec's masked paths: kernel memory, keyrings, timers, firmware."""
        self.attack("read_masked_proc_paths")
        paths = ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/timer_stats",
                 "/proc/sched_debug", "/proc/latency_stats", "/proc/kallsyms")  # fmt: skip
        dirs = ("/sys/firmware", "/proc/acpi", "/proc/scsi")
        probe = (
            "import os, sys\n"
            f"for p in {paths!r}:\n"
            "    try:\n"
            "        with open(p, 'rb') as f: data = f.read(4096)\n"
            "    except OSError as e:\n"
            "        continue\n"
            "    if p == '/proc/kallsyms' and all(ln.startswith(b'0000000000000000') for ln in data.splitlines()): continue\n"
            "    if data: print('READ', p, len(data))\n"
            f"for d in {dirs!r}:\n"
            "    try:\n"
            "        names = os.listdir(d)\n"
            "    except OSError:\n"
            "        continue\n"
            "    if names: print('LISTED', d, names[:5])\n"
        )
        await sb.write_file("/tmp/pg-mask.py", probe)
        r = await sb.exec("python3 /tmp/pg-mask.py", timeout=60)
        assert "READ" not in r.stdout and "LISTED" not in r.stdout, r.output

    def _host_paths(self, sb: Sandbox, sandbox_spec: SandboxSpec) -> list[str]:
        """Paths of this machine a sandbox's tables must not name (its own are fine)."""
        paths = ["/var/lib/docker", "/var/lib/kubelet", "/var/lib/containerd"]
        if sandbox_spec.template and sandbox_spec.template != sb.workdir:
            paths.append(str(Path(sandbox_spec.template)))
        root = getattr(sb, "host_root", None)
        if root is not None and str(root) != sb.workdir:
            paths.append(str(Path(root).parent))
        return paths

    @pytest.mark.asyncio
    async def test_host_paths_in_mount_table(self, sb: Sandbox, sandbox_spec: SandboxSpec) -> None:
        """mountinfo names where the working copy lives on this machine (where root could
        plant a program for the kernel to run): it must not."""
        self.attack("host_paths_in_mount_table")
        r = await sb.exec("cat /proc/self/mountinfo /proc/1/mountinfo", timeout=30)
        leaked = [p for p in self._host_paths(sb, sandbox_spec) if p in r.stdout]
        assert not leaked, f"the sandbox's mount table names this machine's {leaked}:\n{r.stdout}"

    @pytest.mark.asyncio
    async def test_host_paths_in_cgroup(self, sb: Sandbox) -> None:
        """A cgroup namespace: the sandbox sees its own group as ``/``."""
        self.attack("host_paths_in_cgroup")
        r = await sb.exec("cat /proc/self/cgroup; cat /proc/1/cgroup", timeout=30)
        lines = [ln for ln in r.stdout.splitlines() if ln.count(":") >= 2]
        assert lines or not self.proc_cgroup_lists_groups, r.output
        outside = [ln for ln in lines if ln.split(":", 2)[2] not in ("/", "")]
        assert not outside, f"the sandbox sees cgroup paths of this machine: {outside}"

    @pytest.mark.asyncio
    async def test_fork_snapshot_symlink_race(
        self, sb: Sandbox, host_secret: tuple[Path, str], tmp_path: Path
    ) -> None:
        """While the parent is forked, its processes swap directories for links to this
        machine's files (``renameat2`` exchange): no child may see a host file."""
        self.attack("fork_snapshot_symlink_race")
        path, secret = host_secret
        racer = (
            "import ctypes, os, sys\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "NR = {'x86_64': 316, 'aarch64': 276}[os.uname().machine]\n"
            "pairs = []\n"
            "for base in sys.argv[2:]:\n"
            "    d, l = os.path.join(base, 'pgrace-d'), os.path.join(base, 'pgrace-l')\n"
            "    os.makedirs(d, exist_ok=True)\n"
            "    for i in range(50):\n"
            "        os.makedirs(os.path.join(d, 'sub%d' % i), exist_ok=True)\n"
            "        open(os.path.join(d, 'sub%d' % i, 'f'), 'w').write('mine\\n')\n"
            "    open(os.path.join(d, os.path.basename(sys.argv[1])), 'w').write('mine\\n')\n"
            "    if not os.path.lexists(l): os.symlink(os.path.dirname(sys.argv[1]), l)\n"
            "    pairs.append((d.encode(), l.encode()))\n"
            "open('/tmp/pgrace-ready', 'w').write('1')\n"
            "while True:\n"
            "    for d, l in pairs:\n"
            "        libc.syscall(NR, -100, d, -100, l, 2)\n"
        )
        await sb.write_file("/tmp/pg-race.py", racer)
        await sb.exec(
            f"(python3 /tmp/pg-race.py {path} {sb.workdir} /tmp >/dev/null 2>&1 &); "
            "for i in $(seq 300); do [ -e /tmp/pgrace-ready ] && break; sleep 0.1; done",
            timeout=60,
        )
        refused: list[str] = []
        for _ in range(FORK_RACE_TRIES):
            try:
                kids = await sb.fork(1)
            except SandboxError as exc:
                refused.append(str(exc))
                continue
            for kid in kids:
                try:
                    r = await kid.exec(
                        f"cat {sb.workdir}/pgrace-*/* /tmp/pgrace-*/* 2>/dev/null; "
                        f"grep -rl {secret} {sb.workdir} /tmp 2>/dev/null; true",
                        timeout=60,
                    )
                    assert secret not in r.stdout, "a fork copied a file of this machine"
                finally:
                    await kid.close()
        await sb.exec("pkill -f pg-race.py; true", timeout=30)
        assert not refused, f"the parent's racing links made its fork fail: {refused[:2]}"
