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
from patchgym_sandbox.testing.suite import BackendSuite

SECRET_VAR = "PATCHGYM_SECURITY_SECRET"
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


class SandboxSecurity(FileAttacks, BackendSuite):
    """Attacks from inside as root; each must fail. See the module docstring."""

    run_id: ClassVar[str] = "security"
    cannot_prevent: ClassVar[Mapping[str, str]] = {}
    """Attack (test name without ``test_``) -> why this backend's engine cannot stop it."""
    memory_limit_mb: ClassVar[int] = 256
    pids_limit: ClassVar[int] = 64
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
