"""Agents for SWE environments: parsing, prompts, scaffolds, policies and the rollout runner.

>>> from patchgym_agents import GoldPatchPolicy, RolloutConfig, rollout
>>> from patchgym_envs import bundled_tasks
>>> summary = await rollout(bundled_tasks(), GoldPatchPolicy(), RolloutConfig(output_dir="out"))
"""

from patchgym_agents.agent import SWEAgent
from patchgym_agents.agent_factory import make_agent
from patchgym_agents.driver import (
    EndReason,
    EnvStep,
    EpisodeDriver,
    Outcome,
    Turns,
    hack_metrics,
)
from patchgym_agents.episode import EpisodeResult, Timings, run_episode
from patchgym_agents.graph_planner.agent import GraphPlannerAgent
from patchgym_agents.graph_planner.parsing import parse_graph_reply
from patchgym_agents.graph_planner.planner import RulePlanner
from patchgym_agents.graph_planner.policy import RulePlannerPolicy
from patchgym_agents.history import ContextBudget, History, approx_tokens
from patchgym_agents.parsing import ParseResult, parse_text, parse_tool_calls, split_thinking
from patchgym_agents.policies import (
    ContextLengthExceeded,
    EpisodeContext,
    GoldPatchPolicy,
    OpenAIPolicy,
    Policy,
    PolicyError,
    PolicyUnavailable,
    Sampling,
    ScriptedPolicy,
    ScriptExhausted,
)
from patchgym_agents.rollout import RolloutConfig, RolloutSummary, rollout
from patchgym_agents.scaffolds import SCAFFOLDS, AgentScaffold, ToolFormat, agent_scaffold
from patchgym_agents.types import Action, ModelReply, Step, Trajectory, Usage

__version__ = "0.1.0"

__all__ = [
    "SCAFFOLDS",
    "Action",
    "AgentScaffold",
    "ContextBudget",
    "ContextLengthExceeded",
    "EndReason",
    "EnvStep",
    "EpisodeContext",
    "EpisodeDriver",
    "EpisodeResult",
    "GoldPatchPolicy",
    "GraphPlannerAgent",
    "History",
    "ModelReply",
    "OpenAIPolicy",
    "Outcome",
    "ParseResult",
    "Policy",
    "PolicyError",
    "PolicyUnavailable",
    "RolloutConfig",
    "RolloutSummary",
    "RulePlanner",
    "RulePlannerPolicy",
    "SWEAgent",
    "Sampling",
    "ScriptExhausted",
    "ScriptedPolicy",
    "Step",
    "Timings",
    "ToolFormat",
    "Trajectory",
    "Turns",
    "Usage",
    "agent_scaffold",
    "approx_tokens",
    "hack_metrics",
    "make_agent",
    "parse_graph_reply",
    "parse_text",
    "parse_tool_calls",
    "rollout",
    "run_episode",
    "split_thinking",
]
