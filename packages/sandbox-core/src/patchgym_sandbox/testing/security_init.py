"""Security attacks on the sandbox's init and exec server: steering the OOM killer at them,
giving them limits that end them.

Part of :class:`~patchgym_sandbox.testing.security.SandboxSecurity` (same fixtures, same
``cannot_prevent`` skips). Raising a process's ``oom_score_adj`` needs no privilege over
one's own processes, and a policy that points the OOM killer at PID 1 (or at the exec
server every command runs through) turns its own memory use into a lost sandbox, an infra
error masked from training instead of a failure scored 0. A root process inside writes the
highest scores through every path it can name to those processes' ``oom_score_adj`` and
legacy ``oom_adj``: ``/proc/<pid>``, each thread's ``/proc/<pid>/task/<tid>`` and
``/proc/<tid>``, ``openat`` beneath an open ``/proc/<pid>``, ``/proc/<pid>/root/proc``; it
first tries to unmount whatever covers them and to mount a procfs of its own. None of it
may change their scores. The command's own processes (its session) stay its to change.
Likewise ``prlimit`` on another process of the same uid (``RLIMIT_NOFILE`` of 4 leaves
the server unable to start a command, ``RLIMIT_CPU`` has the kernel kill it) must fail.
"""

from __future__ import annotations

import pytest

from patchgym_sandbox.sandbox import Sandbox

PROBE = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
which = sys.argv[1]
me = str(os.getsid(0))


def ancestors():
    # the processes this command runs under, outside its own session: the exec server
    found, pid = [], os.getpid()
    while pid > 0:
        try:
            with open('/proc/%d/stat' % pid) as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except OSError:
            break
        if fields[3] != me:
            found.append(pid)
        pid = int(fields[1])
    return found


def tids(pid):
    try:
        return [int(t) for t in os.listdir('/proc/%d/task' % pid)]
    except OSError:
        return [pid]


def score(pid):
    try:
        with open('/proc/%d/oom_score_adj' % pid) as f:
            return f.read().strip()
    except OSError as e:
        return 'unreadable (%s)' % e.strerror


targets = [1] if which == 'init' else ancestors()
print('TARGETS', targets)
if sys.argv[2:] == ['limits']:
    import resource
    for pid in targets:
        for tid in tids(pid):
            try:
                resource.prlimit(tid, resource.RLIMIT_NOFILE, (4, 4))
                print('LIMITED', pid, 'through', tid)
            except OSError:
                pass
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    print('OWN', resource.getrlimit(resource.RLIMIT_NOFILE))
    sys.exit(0)
before = dict((pid, score(pid)) for pid in targets)
procs = ['/proc']
os.makedirs('/tmp/pg-oom-proc', exist_ok=True)
if libc.mount(b'proc', b'/tmp/pg-oom-proc', b'proc', 0, None) == 0:
    print('MOUNTED a procfs of its own')
    procs.append('/tmp/pg-oom-proc')
paths = []
for pid in targets:
    for proc in procs:
        base = '%s/%d' % (proc, pid)
        dirs = [base, '%s/root/proc/%d' % (base, pid)]
        try:
            tid_names = os.listdir(base + '/task')
        except OSError:
            tid_names = [str(pid)]
        for tid in tid_names:
            dirs += ['%s/task/%s' % (base, tid), '%s/%s' % (proc, tid)]
        for d in dirs:
            paths += [(d + '/oom_score_adj', b'1000'), (d + '/oom_adj', b'15')]
for path, _ in paths:
    if libc.umount2(path.encode(), 2) == 0:  # MNT_DETACH
        print('UNMOUNTED', path)
for path, value in paths:
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        continue
    try:
        os.write(fd, value)
        print('WROTE', path)
    except OSError:
        pass
    finally:
        os.close(fd)
for pid in targets:
    try:
        dfd = os.open('/proc/%d' % pid, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        continue
    try:
        for name, value in (('oom_score_adj', b'1000'), ('oom_adj', b'15')):
            try:
                fd = os.open(name, os.O_WRONLY, dir_fd=dfd)
            except OSError:
                continue
            try:
                os.write(fd, value)
                print('WROTE beneath /proc/%d:' % pid, name)
            except OSError:
                pass
            finally:
                os.close(fd)
    finally:
        os.close(dfd)
for pid in targets:
    if score(pid) != before[pid]:
        print('CHANGED', pid, before[pid], '->', score(pid))
with open('/proc/self/oom_score_adj', 'w') as f:
    f.write('500')
print('OWN', score(os.getpid()))
"""
"""``python3 - <init|server> [limits]``: attack PID 1 or the command's ancestors; prints
what went through (``WROTE``, ``CHANGED``, ``UNMOUNTED``, ``MOUNTED``), then raises its own
score (``OWN 500``: a command's processes stay its own to change); with ``limits``, tries
``prlimit`` on each of their threads instead (``LIMITED``)."""
BREACHES = ("WROTE", "CHANGED", "UNMOUNTED", "MOUNTED", "LIMITED")


class InitAttacks:
    """Mixed into the security suite; ``attack`` and ``sb`` come from it."""

    def attack(self, name: str) -> None:
        raise NotImplementedError

    async def _aim_oom_killer(self, sb: Sandbox, which: str) -> str:
        await sb.write_file("/tmp/pg-oom.py", PROBE)
        r = await sb.exec(f"python3 /tmp/pg-oom.py {which}", timeout=60)
        assert r.exit_code == 0, r.output
        breaches = [ln for ln in r.stdout.splitlines() if ln.startswith(BREACHES)]
        assert not breaches, f"the sandbox's {which} OOM score was raised from inside:\n{r.output}"
        assert "OWN 500" in r.stdout, f"a command could not raise its own OOM score:\n{r.output}"
        return r.stdout

    @pytest.mark.asyncio
    async def test_raise_init_oom_score(self, sb: Sandbox) -> None:
        """PID 1: were the OOM killer to pick it, the whole sandbox would end."""
        self.attack("raise_init_oom_score")
        await self._aim_oom_killer(sb, "init")

    @pytest.mark.asyncio
    async def test_raise_exec_server_oom_score(self, sb: Sandbox) -> None:
        """The processes a command runs under outside its own session (the exec server,
        PID 1 itself where the init serves): were one killed, every command would fail."""
        self.attack("raise_exec_server_oom_score")
        out = await self._aim_oom_killer(sb, "server")
        assert "TARGETS []" not in out, f"no process above the command was visible:\n{out}"

    @pytest.mark.asyncio
    async def test_limit_init_and_exec_server(self, sb: Sandbox) -> None:
        """``prlimit`` on PID 1 and the exec server, through each of their threads: a file
        limit of 4 would leave the server unable to start any command. A command still
        sets its own limits."""
        self.attack("limit_init_and_exec_server")
        await sb.write_file("/tmp/pg-oom.py", PROBE)
        out = ""
        for which in ("init", "server"):
            r = await sb.exec(f"python3 /tmp/pg-oom.py {which} limits", timeout=60)
            assert r.exit_code == 0 and "OWN (64, 64)" in r.stdout, r.output
            out += r.stdout
        after = await sb.exec("echo still-here", timeout=60)
        breaches = [ln for ln in out.splitlines() if ln.startswith(BREACHES)]
        assert not breaches, f"limits of the sandbox's init were set from inside:\n{out}"
        assert after.stdout == "still-here\n", after.output
