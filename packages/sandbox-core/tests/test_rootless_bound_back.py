"""Which host mounts a sandbox's minimal root binds back (``rootless._bound_back``): the
same choice as comparing every kept folder with every mount, in one pass over the table."""

from __future__ import annotations

import os
import random

from patchgym_sandbox.local import rootless

KEEP = [*rootless.NEEDED, "/usr/bin"]


def _pairwise(keep: list[str], points: list[str]) -> list[str]:
    """The reference: each kept folder against each mount point."""

    def beneath(point: str, folder: str) -> bool:
        return point == folder or point.startswith(folder.rstrip("/") + "/")

    chosen: list[str] = []
    for folder in sorted(keep):
        if not os.path.isdir(folder) or os.path.islink(folder):
            continue
        holders = [p for p in points if p != "/" and beneath(folder, p)]
        if holders:
            target = min(holders, key=len)
        elif any(beneath(p, folder) for p in points):
            target = folder
        else:
            continue
        if not any(beneath(target, c) for c in chosen):
            chosen = [c for c in chosen if not beneath(c, target)] + [target]
    return chosen


def test_a_docker_hosts_table() -> None:
    points = ["/", "/proc", "/dev", "/dev/pts", "/dev/shm", "/sys", "/sys/fs/cgroup",
              "/var/lib/docker/overlay2/abc/merged", "/run/docker/netns/1", "/etc/hosts",
              "/usr/local/nvidia"]  # fmt: skip
    assert rootless._bound_back(KEEP, points) == _pairwise(KEEP, points)
    assert set(rootless._bound_back(KEEP, points)) >= {"/proc", "/dev", "/sys", "/etc"}


def test_random_tables_choose_as_the_pairwise_comparison() -> None:
    rng = random.Random(28)
    parts = ["usr", "bin", "lib", "etc", "proc", "sys", "dev", "fs", "cgroup", "local", "x"]
    for _ in range(300):
        points = ["/"] + [
            "/" + "/".join(rng.choice(parts) for _ in range(rng.randint(1, 4)))
            for _ in range(rng.randint(0, 40))
        ]
        assert rootless._bound_back(KEEP, points) == _pairwise(KEEP, points), points


def test_the_root_folder_kept() -> None:
    for points in (["/"], ["/", "/proc"], []):
        assert rootless._bound_back(["/", "/proc"], points) == _pairwise(["/", "/proc"], points)


def test_upwards() -> None:
    assert rootless._upwards("/usr/lib/x") == ["/usr/lib/x", "/usr/lib", "/usr", "/"]
    assert rootless._upwards("/") == ["/"]
