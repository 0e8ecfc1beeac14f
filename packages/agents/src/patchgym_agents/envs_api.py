"""The one place this package touches ``patchgym_envs`` (API drift is a one-file fix)."""

from __future__ import annotations

from patchgym_envs import (
    EnvConfig,
    Scaffold,
    SWEEnv,
    Task,
    ToolCall,
    bundled_task,
    bundled_tasks,
    get_scaffold,
    load_tasks,
    scaffold_names,
)
from patchgym_envs.config import default_of
from patchgym_envs.env import Provision
from patchgym_envs.grading import HackFlag, Verdict
from patchgym_envs.graph import (
    GRAPH_ACTION,
    ExploreAction,
    GraphAction,
    MemoryAction,
    RepairAction,
    SubmitAction,
    action_schema,
    action_to_call,
    parse_action,
)
from patchgym_envs.tools.markup import (
    FUNC_OPEN,
    MAX_ACTION_BYTES,
    MAX_ACTION_DEPTH,
    PARAM_OPEN,
    ActionInvalid,
    ActionTooLarge,
    check_value,
    loads_json,
    split_think,
)

__all__ = [
    "FUNC_OPEN",
    "GRAPH_ACTION",
    "MAX_ACTION_BYTES",
    "MAX_ACTION_DEPTH",
    "PARAM_OPEN",
    "ActionInvalid",
    "ActionTooLarge",
    "EnvConfig",
    "ExploreAction",
    "GraphAction",
    "HackFlag",
    "MemoryAction",
    "Provision",
    "RepairAction",
    "SWEEnv",
    "Scaffold",
    "SubmitAction",
    "Task",
    "ToolCall",
    "Verdict",
    "action_schema",
    "action_to_call",
    "bundled_task",
    "bundled_tasks",
    "check_value",
    "default_of",
    "get_scaffold",
    "load_tasks",
    "loads_json",
    "parse_action",
    "scaffold_names",
    "split_think",
]
