"""Keep the OOM killer off a sandbox's namespace init, from outside, where the kernel lets us.

Pages of a tmpfs belong to no process, so a sandbox that fills ``/tmp`` up to its memory
limit leaves the OOM killer choosing among processes of nearly equal size, often PID 1 of
the namespace, which ends the whole sandbox. The driver sets the init's
``oom_score_adj`` to -1000 right after launch; the init resets it to 0 in every command it
starts (raising needs no privilege), so commands stay killable and only the init is
spared. Lowering below 0 needs ``CAP_SYS_RESOURCE``: where the driver lacks it (some VMs,
rootless runs) the write fails, :func:`protect` returns False, and the sandbox runs
unprotected; a sandbox its own processes end is then still scored as the policy's failure
(``patchgym_envs.blame``), only less often avoided.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

PROTECTED = -1000
_warned = False


def protect(pid: int) -> bool:
    """Set ``pid``'s ``oom_score_adj`` to -1000; False (logged once) where not permitted."""
    global _warned
    path = f"/proc/{pid}/oom_score_adj"
    try:
        with open(path, "w") as fh:
            fh.write(str(PROTECTED))
        with open(path) as fh:
            return int(fh.read().strip()) == PROTECTED
    except (OSError, ValueError) as exc:
        if not _warned:
            _warned = True
            log.info(
                "cannot protect sandbox inits from the OOM killer (%s): needs CAP_SYS_RESOURCE",
                exc,
            )
        return False
