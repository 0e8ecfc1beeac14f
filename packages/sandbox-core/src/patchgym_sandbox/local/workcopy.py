"""Working copies of a template directory: overlayfs when we can mount, else a copy."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from patchgym_sandbox.local.ownthread import in_own_thread

MNT_DETACH = 2
CLONE_FS = 0x200
MS_NOSUID = 2
MS_NODEV = 4
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def mount_overlay(
    lower: Path | Sequence[Path],
    upper: Path,
    work: Path,
    target: Path,
    *,
    names_under: Path | None = None,
) -> None:
    """Mount an overlay; a sequence of lower dirs stacks them, the first one on top.

    With ``names_under`` (a directory only the driver writes, above ``upper`` and
    ``work``) the mount options name the layers relative to it (``lowerdir=l0:l1,
    upperdir=disk/upper``, through links ``l0``, ``l1`` made there): the options are what
    ``/proc/self/mountinfo`` shows inside the sandbox, and they name no host path. The
    mount then runs in a ``mount`` child whose working directory is ``names_under`` (the
    driver's own cannot change: it has many threads)."""
    lowers = [lower] if isinstance(lower, Path) else list(lower)
    if names_under is None:
        opts = f"lowerdir={':'.join(map(str, lowers))},upperdir={upper},workdir={work}"
        if _libc.mount(b"overlay", str(target).encode(), b"overlay", 0, opts.encode()) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mount overlay on {target}: {os.strerror(err)}")
        return
    names = []
    for i, layer in enumerate(lowers):
        link = names_under / f"l{i}"
        link.symlink_to(layer)
        names.append(link.name)
    rel = partial(os.path.relpath, start=names_under)
    opts = f"lowerdir={':'.join(names)},upperdir={rel(upper)},workdir={rel(work)}"

    def mount_there() -> None:
        if _libc.mount(b"overlay", rel(target).encode(), b"overlay", 0, opts.encode()) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mount overlay on {target}: {os.strerror(err)}")

    in_own_cwd(names_under, mount_there)


def in_own_cwd(where: Path, fn: Callable[[], None]) -> None:
    """Run ``fn`` in a short-lived thread whose working directory alone is ``where``
    (``unshare(CLONE_FS)`` gives the thread its own; the process's never changes): relative
    mount options without a ``mount`` child process (~4 ms of fork and exec)."""

    def run() -> None:
        if _libc.unshare(CLONE_FS) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"unshare(CLONE_FS): {os.strerror(err)}")
        os.chdir(where)
        fn()

    in_own_thread(run, "patchgym-mount")


def mount_tmpfs(target: Path, size_mb: int | None) -> None:
    """A tmpfs, size-limited when ``size_mb`` is given: the sandbox's disk (its pages also
    count as its memory)."""
    opts = (f"size={size_mb}m,mode=0755" if size_mb else "mode=0755").encode()
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
