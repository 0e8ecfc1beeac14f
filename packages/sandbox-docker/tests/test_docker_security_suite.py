"""The security section of the conformance suite (``patchgym_sandbox.testing.security``)
against the docker backend with default settings, on the real engine."""

from __future__ import annotations

from typing import ClassVar

import pytest
from conftest import DefaultDockerTarget

from patchgym_sandbox import SandboxSpec
from patchgym_sandbox.testing.security import SandboxSecurity

DISK = (
    "overlay2 on this engine's ext4 data root has no per-container size: `storage_opt size=` "
    "needs an XFS data root mounted with pquota (set extra_host_config storage_opt there)"
)


ROOT = (
    "container root is host root unless the engine runs with userns-remap (a daemon-wide "
    "setting of the shared engine, not a container option); dropped capabilities, the "
    "seccomp profile and the read-only /proc/sys are what stand between them here"
)
MOUNTINFO = (
    "the overlay2 storage driver mounts each container's root with its layers' paths under "
    "the engine's data root (lowerdir=/var/lib/docker/overlay2/...); no container option "
    "changes that"
)
EXEC_SERVER_OOM = (
    "the exec server is a `docker exec` process started after the container, so no "
    "ReadonlyPaths entry (fixed at create; PID 1's are there, seccomp.INIT_OOM_PATHS) can "
    "name its /proc files, and container root, this machine's root without userns-remap, "
    "keeps CAP_DAC_OVERRIDE (cap_add: installs, git) over them; an OOM kill of the server "
    "ends that command as the policy's failure (runner killed) and the server restarts on "
    "the next exec"
)


class TestDockerSecurity(DefaultDockerTarget, SandboxSecurity):
    """Default backend settings: capabilities dropped, no-new-privileges, no network."""

    cannot_prevent: ClassVar[dict[str, str]] = {
        "exceed_disk": DISK,
        "sandbox_root_is_host_root": ROOT,
        "host_paths_in_mount_table": MOUNTINFO,
        "raise_exec_server_oom_score": EXEC_SERVER_OOM,
    }

    @pytest.fixture
    def sandbox_spec(self, test_image: str) -> SandboxSpec:
        return SandboxSpec(image=test_image, workdir="/testbed")
