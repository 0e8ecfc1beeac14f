"""Write patchgym's seccomp policy where a kubelet reads ``Localhost`` profiles.

``python -m patchgym_k8s.seccomp_profile [SECCOMP_ROOT [NAME]]`` (defaults
``/var/lib/kubelet/seccomp`` and ``patchgym.json``) on each node, then set
``seccomp_profile: Localhost`` in the k8s backend's config. The profile is
:func:`patchgym_sandbox.seccomp.docker_profile`: the same denials as the local and docker
backends.
"""

from __future__ import annotations

import sys
from pathlib import Path

from patchgym_sandbox import seccomp

DEFAULT_ROOT = Path("/var/lib/kubelet/seccomp")


def install(root: Path = DEFAULT_ROOT, name: str = "patchgym.json") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / name
    path.write_text(seccomp.docker_profile_json() + "\n")
    return path


if __name__ == "__main__":
    args = sys.argv[1:]
    print(install(Path(args[0]) if args else DEFAULT_ROOT, *args[1:2]))
