"""Working copies of a template directory: overlayfs when we can mount, else a copy."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

MNT_DETACH = 2
MS_NOSUID = 2
MS_NODEV = 4
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def mount_overlay(lower: Path | Sequence[Path], upper: Path, work: Path, target: Path) -> None:
    """Mount an overlay; a sequence of lower dirs stacks them, the first one on top."""
    lowers = ":".join(map(str, [lower] if isinstance(lower, Path) else lower))
    opts = f"lowerdir={lowers},upperdir={upper},workdir={work}".encode()
    if _libc.mount(b"overlay", str(target).encode(), b"overlay", 0, opts) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount overlay on {target}: {os.strerror(err)}")


def mount_tmpfs(target: Path, size_mb: int) -> None:
    """A size-limited tmpfs: the sandbox's disk (its pages also count as its memory)."""
    opts = f"size={size_mb}m,mode=0755".encode()
    if _libc.mount(b"tmpfs", str(target).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount tmpfs on {target}: {os.strerror(err)}")


def unmount(target: Path) -> None:
    if _libc.umount2(str(target).encode(), MNT_DETACH) != 0:
        err = ctypes.get_errno()
        if err not in (22, 2):  # EINVAL: not a mount point; ENOENT: gone
            raise OSError(err, f"umount {target}: {os.strerror(err)}")


def is_mounted(target: Path) -> bool:
    return os.path.ismount(target)


def overlay_supported(probe_dir: Path) -> bool:
    """Try one tiny overlay mount; the answer is cached by the caller."""
    probe_dir.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix=".overlay-probe-", dir=probe_dir))
    dirs = [base / d for d in ("lower", "upper", "work", "merged")]
    mounted = False
    try:
        for d in dirs:
            d.mkdir()
        mount_overlay(*dirs)
        mounted = True
        return True
    except OSError:
        return False
    finally:
        if mounted:
            unmount(dirs[3])
        shutil.rmtree(base, ignore_errors=True)


def copy_tree(template: Path, target: Path) -> None:
    """``cp -a --reflink=auto``: block-shared on reflink filesystems, a full copy elsewhere."""
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["cp", "-a", "--reflink=auto", f"{template}/.", str(target)],
        check=True,
        capture_output=True,
    )


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    if path.exists():  # read-only dirs made by the command
        subprocess.run(["chmod", "-R", "u+rwX", str(path)], capture_output=True)
        shutil.rmtree(path, ignore_errors=True)
