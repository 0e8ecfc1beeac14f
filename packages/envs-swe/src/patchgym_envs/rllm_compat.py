"""rLLM's ``SWEEnv`` constructor spellings, mapped onto :class:`~patchgym_envs.env.EnvConfig`.

rLLM (``rllm/environments/swe/swe.py``) builds its env as
``SWEEnv(entry, dataset, idx, step_timeout, reward_timeout, backend, delete_image,
verbose, scaffold)``. Each name maps onto the setting that already owns it here; no
setting gets a second home:

| rLLM | patchgym | difference |
|---|---|---|
| ``entry`` | ``task`` | any row format :func:`convert_row` reads, not only R2E-Gym |
| ``dataset`` + ``idx`` | ``task=dataset[idx]`` | ``idx`` is required (rLLM picks a random row) |
| ``backend="docker"`` / ``"kubernetes"`` / ``"local"`` / ``"ags"`` | ``sandbox={"type": "docker" / "k8s" / "local" / "ags"}`` | a backend object is still accepted as ``backend=`` |
| ``step_timeout`` (s) | ``step_timeout_s`` | the deadline kills the command's whole process tree |
| ``reward_timeout`` (s) | the task's ``eval_timeout`` | applies to every task this env runs |
| ``delete_image=False`` | (default) | ``True`` is refused: images are shared between episodes; remove them after the run |
| ``verbose`` | ``verbose`` (log level of ``patchgym_envs.env``) | logs each step's action and observation head at INFO |
| ``scaffold`` | ``scaffold`` | also ``debug-gym`` |

Unknown keyword arguments raise :class:`~patchgym_envs.errors.EnvConfigError` naming them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from patchgym_envs.errors import EnvConfigError

BACKEND_TYPES: dict[str, str] = {
    "docker": "docker",
    "kubernetes": "k8s",
    "k8s": "k8s",
    "local": "local",
    "ags": "ags",
    "e2b": "e2b",
}
RLLM_ONLY_KEYS = frozenset(
    {"entry", "dataset", "step_timeout", "reward_timeout", "delete_image", "verbose"}
)
"""Keys of rLLM's ``SWEEnv.__init__`` that are not :class:`EnvConfig` fields."""


def backend_sandbox(name: str, sandbox: Mapping[str, Any] | None) -> dict[str, Any]:
    """rLLM's ``backend`` string as our ``sandbox`` config (conflicts are errors)."""
    kind = BACKEND_TYPES.get(name)
    if kind is None:
        raise EnvConfigError(
            f"unknown backend {name!r} — allowed: {', '.join(sorted(BACKEND_TYPES))}"
        )
    base = dict(sandbox or {})
    if base.get("type", kind) != kind and sandbox is not None and "type" in base:
        raise EnvConfigError(
            f"backend={name!r} conflicts with sandbox.type={base['type']!r}; set one of them"
        )
    base["type"] = kind
    return base


def translate(kwargs: dict[str, Any], *, task: Any, idx: Any) -> tuple[Any, float | None, bool]:
    """Pop rLLM's keys from ``kwargs`` (mutated; ``step_timeout`` becomes ``step_timeout_s``).

    Returns ``(task, eval_timeout_override, verbose)``.
    """
    entry = kwargs.pop("entry", None)
    dataset = kwargs.pop("dataset", None)
    if entry is not None:
        if task is not None:
            raise EnvConfigError("pass the task once: `task` or rLLM's `entry`, not both")
        task = entry
    if dataset is not None:
        if task is not None:
            raise EnvConfigError("pass either a task (`task`/`entry`) or `dataset` + `idx`")
        if idx is None:
            raise EnvConfigError(
                "`dataset` needs `idx` (the row to run); rLLM's random pick is not supported"
            )
        task = dataset[int(idx)]
    if "step_timeout" in kwargs:
        kwargs.setdefault("step_timeout_s", float(kwargs.pop("step_timeout")))
    reward_timeout = kwargs.pop("reward_timeout", None)
    if kwargs.pop("delete_image", False):
        raise EnvConfigError(
            "delete_image=True is not supported: patchgym shares an image between episodes "
            "(and pre-pulls it); remove images after the run (`docker rmi`)"
        )
    verbose = bool(kwargs.pop("verbose", False))
    return task, float(reward_timeout) if reward_timeout is not None else None, verbose


ROW_KEYS = frozenset({"backend", "idx", "index", "split", "task"})
"""Keys ``SWEEnv.from_dict`` reads besides env args and the task's own fields (verl rows add ``index`` and ``split``)."""


def check_unknown(kwargs: Mapping[str, Any], known: frozenset[str]) -> None:
    """Refuse keys that are neither ours nor rLLM's, naming them."""
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise EnvConfigError(
            f"unknown SWEEnv argument(s) {', '.join(map(repr, unknown))} — allowed: "
            f"{', '.join(sorted(known | RLLM_ONLY_KEYS | {'backend', 'idx', 'task', 'config'}))}"
        )


def check_task_row(data: Mapping[str, Any], task_fields: frozenset[str]) -> None:
    """A patchgym task row (``Task.to_row``) has a closed key set: refuse anything else.

    Rows of other formats (R2E-Gym, SWE-bench) carry fields we do not read, so only our
    own rows can tell a misspelt env argument from a task field.
    """
    if "source_format" not in data or "eval_script" not in data:
        return
    unknown = sorted(set(data) - task_fields - ROW_KEYS)
    if unknown:
        raise EnvConfigError(
            f"unknown key(s) {', '.join(map(repr, unknown))} in the env args / task row — "
            "not a Task field, an EnvConfig field or one of rLLM's SWEEnv arguments "
            f"({', '.join(sorted(RLLM_ONLY_KEYS))})"
        )
