"""The security section of the conformance suite (``patchgym_sandbox.testing.security``)
through the unmodified e2b SDK against the local stand-in.

The stand-in models the wire protocol, not the cloud's isolation: its "sandbox" is a
bubblewrap jail on this machine. What only the cloud's microVM provides is declared
below with the reason (see the package README for what AGS/E2B guarantee).
"""

from __future__ import annotations

from typing import ClassVar

from conftest import E2bStandinTarget

from patchgym_sandbox.testing.security import SandboxSecurity

STANDIN = "the stand-in runs each sandbox as a bubblewrap jail on this machine (a read-only view "
CLOUD = "; in AGS/E2B every sandbox is its own microVM, so this reaches only that VM"
CANNOT_PREVENT: dict[str, str] = {
    "file_api_follows_links": STANDIN
    + "of the host, envd's file service resolving host paths)"
    + CLOUD,
    "connect_engine_sockets": STANDIN + "of the host, /run included)" + CLOUD,
    "read_shadow_and_root_home": STANDIN + "of the host, /root and /etc included)" + CLOUD,
    "kill_driver": STANDIN + "sharing the driver's PID namespace: it kills pytest)" + CLOUD,
    "leave_cgroups": "root inside the stand-in's jail can mount a cgroup hierarchy "
    "(observed: mount -t cgroup succeeds there), and with it leave its groups" + CLOUD,
    "exceed_memory": "the stand-in sets no cgroup limits; the cloud sizes the microVM "
    "(template / x-custom-config resources)",
    "exceed_process_count": "the stand-in sets no pids limit; in the cloud a fork bomb only "
    "exhausts its own microVM",
    "sandbox_root_is_host_root": STANDIN
    + "run as this machine's root, with no user namespace: it stands in for a VM's root)"
    + CLOUD,
    "write_host_kernel_state": STANDIN
    + "whose /proc/sys is this machine's: root there can set this kernel's sysctls)"
    + "; in AGS/E2B the microVM has its own kernel",
    "dangerous_system_calls": STANDIN
    + "with no seccomp filter: keyctl, io_uring, bpf, ptrace reach this kernel)"
    + "; in AGS/E2B they reach only the microVM's own kernel",
    "read_masked_proc_paths": STANDIN + "with this machine's /proc unmasked)" + CLOUD,
    "host_paths_in_mount_table": STANDIN + "whose mounts are this machine's paths)" + CLOUD,
    "host_paths_in_cgroup": STANDIN + "in this machine's cgroups, no cgroup namespace)" + CLOUD,
    "raise_init_oom_score": STANDIN + "in this machine's PID namespace: its PID 1 is this "
    "machine's init, its exec server the test process)" + CLOUD,
    "raise_exec_server_oom_score": STANDIN + "in this machine's PID namespace, as root: the "
    "exec server is the test process itself)" + CLOUD,
    "limit_init_and_exec_server": STANDIN + "in this machine's PID namespace with no seccomp "
    "filter: prlimit would reach this machine's init)" + CLOUD,
    "exceed_disk": "the stand-in's working copy is a plain directory; the cloud's disk is the "
    "microVM's own, sized by the template",
}


class TestE2bStandinSecurity(E2bStandinTarget, SandboxSecurity):
    cannot_prevent: ClassVar[dict[str, str]] = CANNOT_PREVENT
