"""Task schema, dataset converters, tools and the rLLM-compatible SWE environment.

>>> from patchgym_envs import SWEEnv, bundled_tasks
>>> env = SWEEnv(bundled_tasks()[0], sandbox={"type": "local"}, scaffold="r2egym")
>>> obs, info = env.reset()
>>> obs, reward, done, info = env.step('<function=execute_bash><parameter=cmd>ls</parameter></function>')
>>> env.close()
"""

from patchgym_envs.bundled import (
    bundled_names,
    bundled_task,
    bundled_tasks,
    image_for,
    resolve_template,
)
from patchgym_envs.config import EnvConfig
from patchgym_envs.converters import (
    CONVERTERS,
    ConversionReport,
    ConvertOptions,
    SkippedRow,
    convert_row,
    convert_rows,
    detect_format,
)
from patchgym_envs.env import SWEEnv
from patchgym_envs.errors import (
    BadRowError,
    DatasetError,
    DatasetReadError,
    EmptyDatasetError,
    EnvsError,
    SetupFailed,
    UnknownFormatError,
    UnknownScaffoldError,
    UnknownTaskError,
)
from patchgym_envs.evaluate import evaluate_patch
from patchgym_envs.images import swebench_image, swegym_image, swesmith_image
from patchgym_envs.loading import group_by_image, load_tasks, sort_by_image
from patchgym_envs.readers import SourceRow, iter_rows, read_hf, read_jsonl, read_parquet, read_rows
from patchgym_envs.task import Task
from patchgym_envs.tools import (
    Observation,
    Scaffold,
    ToolCall,
    ToolSpec,
    get_scaffold,
    scaffold_names,
    to_tool_call,
)
from patchgym_envs.writers import verl_row, write_jsonl, write_verl_parquet

__version__ = "0.1.0"

__all__ = [
    "CONVERTERS",
    "BadRowError",
    "ConversionReport",
    "ConvertOptions",
    "DatasetError",
    "DatasetReadError",
    "EmptyDatasetError",
    "EnvConfig",
    "EnvsError",
    "Observation",
    "SWEEnv",
    "Scaffold",
    "SetupFailed",
    "SkippedRow",
    "SourceRow",
    "Task",
    "ToolCall",
    "ToolSpec",
    "UnknownFormatError",
    "UnknownScaffoldError",
    "UnknownTaskError",
    "bundled_names",
    "bundled_task",
    "bundled_tasks",
    "convert_row",
    "convert_rows",
    "detect_format",
    "evaluate_patch",
    "get_scaffold",
    "group_by_image",
    "image_for",
    "iter_rows",
    "load_tasks",
    "read_hf",
    "read_jsonl",
    "read_parquet",
    "read_rows",
    "resolve_template",
    "scaffold_names",
    "sort_by_image",
    "swebench_image",
    "swegym_image",
    "swesmith_image",
    "to_tool_call",
    "verl_row",
    "write_jsonl",
    "write_verl_parquet",
]
