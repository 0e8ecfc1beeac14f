"""What each ``patchgym`` command does (the typer front end, :mod:`patchgym_trainer.cli`,
parses the line and calls these).

- :mod:`.validate` — ``patchgym validate``: gold resolves, empty does not, per task;
- :mod:`.rollout` — ``patchgym rollout``: a policy over a dataset, K samples per task;
- :mod:`.train` — ``patchgym train``: dispatch to the engine named by ``train.engine``;
- :mod:`.datasets` — ``patchgym datasets convert|register|info``;
- :mod:`.build_local` — ``patchgym datasets build-local``;
- :mod:`.sandboxes` — ``patchgym sandboxes list|reap``.

``patchgym preflight`` is :func:`patchgym_trainer.preflight.run_preflight`; ``patchgym
config`` prints the composed config (:mod:`patchgym_trainer.compose`).
"""
