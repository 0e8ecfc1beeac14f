"""Where validate / rollout episodes run (``run.executor``).

``local`` (the default) runs them in this process, through the agents runner itself; ``ray``
runs each one as a Ray task (:mod:`.ray`), with one admission control for the whole cluster
(:mod:`.ray_admission`); :mod:`.ray_local` starts a private Ray cluster on this machine.
"""
