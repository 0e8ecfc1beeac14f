"""The agent class for a scaffold: :class:`GraphPlannerAgent` for ``graph-planner``, else :class:`SWEAgent`."""

from __future__ import annotations

from typing import Any

from patchgym_agents.agent import SWEAgent
from patchgym_agents.envs_api import default_of
from patchgym_agents.graph_planner.agent import GraphPlannerAgent
from patchgym_agents.scaffolds import agent_scaffold


def make_agent(scaffold: str | None = None, **kw: Any) -> SWEAgent:
    """A fresh agent for ``scaffold`` (any spelling ``get_scaffold`` accepts; None: the
    configured default, ``EnvConfig.scaffold``)."""
    sc = agent_scaffold(scaffold if scaffold is not None else str(default_of("scaffold")))
    if sc.name == "graph-planner":
        return GraphPlannerAgent(sc, **kw)
    return SWEAgent(sc, **kw)
