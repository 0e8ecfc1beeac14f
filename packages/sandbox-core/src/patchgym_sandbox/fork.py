"""The generic ``Sandbox.fork``: the parent's workdir, as one tar stream, in n new sandboxes.

Every backend has it (k8s and ags use it; local and docker have snapshots instead). It
carries the workdir only: what the parent changed elsewhere (/tmp, system packages) and
running processes stay behind; each child starts from the spec's image or template, its
workdir emptied and refilled with the parent's. The archive is held in memory once.
"""

from __future__ import annotations

import asyncio
import io
import tarfile

from patchgym_sandbox.errors import ConfigError, InfraError
from patchgym_sandbox.pool import close_all, start_group
from patchgym_sandbox.sandbox import Sandbox
from patchgym_sandbox.spec import SandboxSpec


async def fork_workdir(parent: Sandbox, spec: SandboxSpec, n: int) -> list[Sandbox]:
    """``n`` started sandboxes of ``spec`` whose workdir is a copy of ``parent``'s."""
    backend = parent.origin
    if backend is None:
        raise ConfigError(
            f"sandbox {parent.id} was not made by a backend's sandbox(): fork needs one"
        )
    tree = contents_of(await parent.get_archive(parent.workdir))
    children = await start_group(backend, spec, n)
    try:
        await asyncio.gather(*(replace_workdir(child, tree) for child in children))
    except BaseException:
        await close_all(children)
        raise
    return children


def contents_of(archive: bytes) -> bytes:
    """The archive of a directory with its top entry dropped: names relative to the directory,
    so it extracts into a workdir whatever that directory is called on either side."""
    out = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(archive), mode="r") as src,
        tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as dst,
    ):
        for member in src:
            rest = member.name.partition("/")[2]
            if not rest:
                continue
            member.name = rest
            if member.islnk():
                member.linkname = member.linkname.partition("/")[2]
            dst.addfile(member, src.extractfile(member) if member.isreg() else None)
    return out.getvalue()


async def replace_workdir(child: Sandbox, tree: bytes) -> None:
    """Empty ``child``'s workdir (so what the parent deleted stays deleted), then extract."""
    emptied = await child.exec(["find", ".", "-mindepth", "1", "-delete"], timeout=600)
    if not emptied.ok:
        raise InfraError(f"fork: cannot empty the workdir of {child.id}: {emptied.output[-500:]}")
    await child.put_archive(child.workdir, tree)
