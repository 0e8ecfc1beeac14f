"""The training engines, each a thin adapter over :class:`patchgym_agents.driver.EpisodeDriver`.

- :mod:`.verl` — verl's agent loop and the launcher (``train.engine=verl``);
- :mod:`.trl` — TRL's ``GRPOTrainer`` and its ``rollout_func`` (``train.engine=trl``, CPU);
- :mod:`.rllm` — rLLM's env/agent classes, workflows and the v0.2 script (``train.engine=rllm``);
- :mod:`.infra_rule` — how each engine is told about a masked (infrastructure) episode.

Each engine's modules import the engine itself only where it is installed.
"""
