"""The launching thread's own identity (``rootless.thread_identity``), as root."""

from __future__ import annotations

import ctypes
import os
import subprocess
import threading

import pytest

from patchgym_sandbox.local import rootless

pytestmark = pytest.mark.skipif(
    not rootless.thread_identity_supported(), reason="needs a root driver on x86_64/aarch64"
)
STATUS = "grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapAmb):' /proc/self/status"


def _status(text: str) -> dict[str, list[str]]:
    return {k: v.split() for k, _, v in (line.partition(":") for line in text.splitlines())}


def test_a_child_started_under_it_is_the_sandbox_uid_for_good_and_the_driver_is_unchanged() -> None:
    seen: dict[str, str] = {}

    def launch() -> None:
        with rootless.thread_identity():
            seen["child"] = subprocess.run(["sh", "-c", STATUS], capture_output=True,
                                           text=True, check=True).stdout  # fmt: skip
        seen["thread"] = f"{os.getresuid()} {os.getresgid()} {os.getgroups()}"

    before = (os.getresuid(), os.getresgid(), os.getgroups())
    worker = threading.Thread(target=launch)
    worker.start()
    worker.join()
    child = _status(seen["child"])
    uid = str(rootless.SANDBOX_UID)
    assert child["Uid"] == [uid] * 4 and child["Gid"] == [uid] * 4
    assert child["Groups"] == []
    assert all(int(child[c][0], 16) == 0 for c in ("CapInh", "CapPrm", "CapEff", "CapAmb"))
    assert seen["thread"] == f"{before[0]} {before[1]} {before[2]}"  # the thread is back
    assert (os.getresuid(), os.getresgid(), os.getgroups()) == before  # the others never left
    dumpable = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
    assert dumpable == rootless._DUMPABLE
