"""SWE-bench in its princeton form (``princeton-nlp/SWE-bench*``, ``SWE-bench/SWE-bench*``)
and SWE-Gym (``SWE-Gym/SWE-Gym``), which uses the same columns.

Princeton columns: ``instance_id``, ``repo``, ``base_commit``, ``patch`` (gold),
``test_patch``, ``problem_statement``, ``hints_text``, ``created_at``, ``version``,
``FAIL_TO_PASS`` / ``PASS_TO_PASS`` (JSON text of lists), ``environment_setup_commit``,
and in Verified ``difficulty``. SWE-Gym stores the two test lists as real lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from patchgym_envs import grading
from patchgym_envs.converters import common as c
from patchgym_envs.converters.options import ConvertOptions
from patchgym_envs.converters.swebench_eval import eval_script
from patchgym_envs.errors import RowError
from patchgym_envs.images import swebench_image, swegym_image
from patchgym_envs.patches import diff_files
from patchgym_envs.task import Task


def _common(row: Mapping[str, Any], opts: ConvertOptions) -> dict[str, Any]:
    instance_id = c.req_str(row, "instance_id")
    repo = c.req_str(row, "repo")
    test_patch = c.req_str(row, "test_patch")
    existing, created = diff_files(test_patch)
    if not existing and not created:
        raise RowError("test_patch", "is not a git diff (no 'diff --git a/... b/...' header)")
    return {
        "id": instance_id,
        "repo": repo,
        "base_commit": c.req_str(row, "base_commit"),
        "problem_statement": c.req_str(row, "problem_statement"),
        "workdir": opts.workdir,
        "env": {"PATH": c.CONDA_PATH},
        "gold_patch": c.req_str(row, "patch"),
        "test_patch": test_patch,
        "stage_test_patch": True,
        "test_files": existing,
        "new_test_files": created,
        "eval_script": eval_script(repo, [*existing, *created], test_cmd=opts.test_cmd),
        "eval_timeout": opts.eval_timeout,
        "grader": "swebench",
        "plugin_autoload": True,
        "log_parser": grading.parser_for(repo),
        "fail_to_pass": c.str_list(row, "FAIL_TO_PASS"),
        "pass_to_pass": c.str_list(row, "PASS_TO_PASS"),
        "version": c.opt_str(row, "version"),
        "created_at": c.opt_str(row, "created_at"),
        "hints": c.opt_str(row, "hints_text", "") or "",
        "metadata": {
            k: c.jsonable(row[k])
            for k in ("environment_setup_commit", "difficulty")
            if row.get(k) is not None
        },
        "original": c.original(row),
    }


def from_swebench(row: Mapping[str, Any], opts: ConvertOptions) -> Task:
    fields = _common(row, opts)
    fields["image"] = swebench_image(
        fields["id"], namespace=opts.swebench_namespace, arch=opts.arch
    )
    return Task(source_format="swebench", **fields)


def from_swegym(row: Mapping[str, Any], opts: ConvertOptions) -> Task:
    fields = _common(row, opts)
    fields["image"] = swegym_image(fields["id"], namespace=opts.swegym_namespace, arch=opts.arch)
    return Task(source_format="swegym", **fields)
