"""One seccomp policy for every backend: Docker's default deny list, at least as strict;
with the OCI runtime spec's masked and read-only paths.

:data:`DENIED` names the system calls a sandbox never gets (``EPERM``): kernel keyrings,
io_uring, bpf, perf, mounts and the new mount API, namespace changes (``unshare``,
``setns``, ``clone`` with a ``CLONE_NEW*`` flag), ``ptrace`` and cross-process memory
access, module loading, kexec, handle-based opens, swap, reboot, the kernel log, clock
setting, ``userfaultfd`` and the NUMA calls Docker reserves to ``CAP_SYS_NICE``. ``clone3``
answers ``ENOSYS`` (its flags sit behind a pointer a filter cannot read; libc falls back to
``clone``), ``personality`` allows only the values Docker allows, and ``prlimit64`` sets
only the caller's own limits (reading another's stays allowed): a process of the same uid,
the sandbox's init among them, could otherwise be given limits that end or disable it
(``RLIMIT_CPU``, ``RLIMIT_NOFILE``). Any other ABI (x32,
i386 on x86_64, arm32 on aarch64) is killed.

:func:`bpf_program` compiles it to the classic BPF that ``bwrap --seccomp`` loads (local
backend); :func:`docker_profile` writes the same policy as a Docker / OCI seccomp profile
(docker and Kubernetes backends).
"""

from __future__ import annotations

import json
import os
import struct
from functools import cache
from typing import Any

MASKED_PATHS = (
    "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
    "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
    "/sys/firmware", "/sys/devices/virtual/powercap",
)  # fmt: skip
"""The OCI runtime spec's (and Docker's) masked paths, for backends that pass them on."""
READONLY_PATHS = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")
"""The OCI runtime spec's read-only paths."""
INIT_OOM_PATHS = ("/proc/1/oom_score_adj", "/proc/1/oom_adj", "/proc/1/task")
"""Read-only over PID 1's OOM score (and its threads'), for runtimes that bind the
read-only paths in the container's own ``/proc`` before its init runs (runc, crun): root
inside, ``CAP_DAC_OVERRIDE`` or not, cannot aim the OOM killer at the init. Whole for a
single-threaded init (docker-init, ``sleep``): another thread's ``/proc/<tid>`` is a path
of its own."""

EPERM, ENOSYS = 1, 38
AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
X32_SYSCALL_BIT = 0x40000000
CLONE_NS_FLAGS = 0x7E020000
"""CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET."""
PERSONALITY_ALLOWED = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)

# name: (x86_64, aarch64); None where the architecture has no such call
_NR: dict[str, tuple[int | None, int | None]] = {
    "acct": (163, 89), "add_key": (248, 217), "bpf": (321, 280),
    "clock_adjtime": (305, 266), "clock_settime": (227, 112), "create_module": (174, None),
    "delete_module": (176, 106), "finit_module": (313, 273), "get_kernel_syms": (177, None),
    "get_mempolicy": (239, 236), "init_module": (175, 105), "ioperm": (173, None),
    "iopl": (172, None), "kcmp": (312, 272), "kexec_file_load": (320, 294),
    "kexec_load": (246, 104), "keyctl": (250, 219), "lookup_dcookie": (212, 18),
    "mbind": (237, 235), "mount": (165, 40), "move_pages": (279, 239),
    "name_to_handle_at": (303, 264), "nfsservctl": (180, 42), "open_by_handle_at": (304, 265),
    "perf_event_open": (298, 241), "pivot_root": (155, 41), "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271), "ptrace": (101, 117), "query_module": (178, None),
    "quotactl": (179, 60), "quotactl_fd": (443, 443), "reboot": (169, 142),
    "request_key": (249, 218), "set_mempolicy": (238, 237), "setns": (308, 268),
    "settimeofday": (164, 170), "swapon": (167, 224), "swapoff": (168, 225),
    "sysfs": (139, None), "_sysctl": (156, None), "syslog": (103, 116),
    "umount2": (166, 39), "unshare": (272, 97), "uselib": (134, None),
    "userfaultfd": (323, 282), "ustat": (136, None), "vhangup": (153, 58),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427), "fsopen": (430, 430), "fsconfig": (431, 431),
    "fsmount": (432, 432), "fspick": (433, 433), "move_mount": (429, 429),
    "open_tree": (428, 428), "mount_setattr": (442, 442), "pidfd_getfd": (438, 438),
    "set_mempolicy_home_node": (450, 450),
}  # fmt: skip
DENIED = tuple(sorted(_NR))
CLONE = (56, 220)
CLONE3 = (435, 435)
PERSONALITY = (135, 92)
PRLIMIT64 = (302, 261)

# classic BPF
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
RET_KILL_PROCESS, RET_ALLOW = 0x80000000, 0x7FFF0000
OFF_NR, OFF_ARCH, OFF_ARG0, OFF_ARG2 = 0, 4, 16, 32


def _ret_errno(err: int) -> int:
    return 0x00050000 | err


def _arch_block(idx: int, ops: list[tuple[int, int, int | str, int | str]]) -> None:
    """Append one architecture's checks (``idx`` 0: x86_64, 1: aarch64); jump targets are
    labels (``"deny"``, ``"enosys"``, ``"allow"``) resolved by :func:`bpf_program`."""
    ops.append((_LD_W_ABS, OFF_NR, 0, 0))
    if idx == 0:
        ops.append((_JGE, X32_SYSCALL_BIT, "kill", 0))
    for name in DENIED:
        nr = _NR[name][idx]
        if nr is not None:
            ops.append((_JEQ, nr, "deny", 0))
    ops.append((_JEQ, CLONE3[idx], "enosys", 0))
    ops.append((_JEQ, CLONE[idx], 0, 3))
    ops.append((_LD_W_ABS, OFF_ARG0, 0, 0))
    ops.append((_JSET, CLONE_NS_FLAGS, "deny", 0))
    ops.append((_RET, RET_ALLOW, 0, 0))
    ops.append((_JEQ, PERSONALITY[idx], 0, len(PERSONALITY_ALLOWED) + 2))
    ops.append((_LD_W_ABS, OFF_ARG0, 0, 0))
    for value in PERSONALITY_ALLOWED:
        ops.append((_JEQ, value, "allow", 0))
    ops.append((_RET, _ret_errno(EPERM), 0, 0))
    ops.append((_JEQ, PRLIMIT64[idx], 0, 6))  # new limits for another process: denied
    ops.append((_LD_W_ABS, OFF_ARG0, 0, 0))
    ops.append((_JEQ, 0, "allow", 0))
    ops.append((_LD_W_ABS, OFF_ARG2, 0, 0))
    ops.append((_JEQ, 0, 0, "deny"))
    ops.append((_LD_W_ABS, OFF_ARG2 + 4, 0, 0))
    ops.append((_JEQ, 0, "allow", "deny"))
    ops.append((_RET, RET_ALLOW, 0, 0))


@cache
def bpf_program() -> bytes:
    """The policy as a ``struct sock_filter[]`` for ``bwrap --seccomp FD`` (built once: it
    depends on nothing but this module)."""
    ops: list[tuple[int, int, int | str, int | str]] = [(_LD_W_ABS, OFF_ARCH, 0, 0)]
    ops.append((_JEQ, AUDIT_ARCH_X86_64, 0, "arm"))
    _arch_block(0, ops)
    arm = len(ops)
    ops.append((_JEQ, AUDIT_ARCH_AARCH64, 0, "kill"))
    _arch_block(1, ops)
    labels = {"arm": arm, "kill": len(ops), "deny": len(ops) + 1, "enosys": len(ops) + 2,
              "allow": len(ops) + 3}  # fmt: skip
    ops += [(_RET, RET_KILL_PROCESS, 0, 0), (_RET, _ret_errno(EPERM), 0, 0),
            (_RET, _ret_errno(ENOSYS), 0, 0), (_RET, RET_ALLOW, 0, 0)]  # fmt: skip
    out = bytearray()
    for i, (code, k, jt, jf) in enumerate(ops):
        jumps = [labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf)]
        if not all(0 <= j <= 255 for j in jumps):
            raise AssertionError(f"seccomp jump out of range at {i}: {jumps}")
        out += struct.pack("=HBBI", code, jumps[0], jumps[1], k)
    return bytes(out)


def bpf_fd() -> int:
    """A memfd holding :func:`bpf_program`, positioned at 0 (bwrap reads it to the end)."""
    fd = os.memfd_create("patchgym-seccomp", os.MFD_CLOEXEC)
    os.write(fd, bpf_program())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def docker_profile() -> dict[str, Any]:
    """The policy as a Docker / OCI seccomp profile (``--security-opt seccomp=...``, a
    Kubernetes ``Localhost`` profile); calls an architecture lacks are left out."""
    names = [n for n in DENIED if any(nr is not None for nr in _NR[n])]
    rules: list[dict[str, Any]] = [
        {"names": names, "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM},
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS},
    ]
    for bit in range(32):
        flag = 1 << bit
        if CLONE_NS_FLAGS & flag:
            rules.append({
                "names": ["clone"], "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM,
                "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}],
            })  # fmt: skip
    allowed = [{"index": 0, "value": v, "op": "SCMP_CMP_NE"} for v in PERSONALITY_ALLOWED]
    rules.append({"names": ["personality"], "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM,
                  "args": allowed})  # fmt: skip
    others = [{"index": i, "value": 0, "op": "SCMP_CMP_NE"} for i in (0, 2)]
    rules.append({"names": ["prlimit64"], "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM,
                  "args": others})  # fmt: skip
    return {
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"],
        "syscalls": rules,
    }


def docker_profile_json() -> str:
    return json.dumps(docker_profile(), separators=(",", ":"))
