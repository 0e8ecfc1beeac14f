"""SWE-smith (``SWE-bench/SWE-smith``).

Columns: ``instance_id`` (also the branch holding the bug in the mirror repository),
``repo`` (``swesmith/<owner>__<name>.<commit8>``), ``patch`` — the diff that *introduced*
the bug, so the gold fix is its reverse —, ``FAIL_TO_PASS`` / ``PASS_TO_PASS`` (lists),
``image_name``, ``base_commit``, ``problem_statement``, ``created_at``.

Setup checks out ``base_commit`` inside the image (no fetch: sandboxes have no network).
Grading resets the test files named by the F2P/P2P ids to ``base_commit`` and runs
them with the SWE-smith default pytest command.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from patchgym_envs import grading
from patchgym_envs.converters import common as c
from patchgym_envs.converters.options import ConvertOptions
from patchgym_envs.converters.swebench_eval import ACTIVATE
from patchgym_envs.images import swesmith_image
from patchgym_envs.patches import reverse_patch
from patchgym_envs.task import Task

TEST_CMD = "pytest --disable-warnings --color=no --tb=no --verbose"


def test_files_of(test_ids: list[str]) -> list[str]:
    files = sorted({t.split("::", 1)[0] for t in test_ids if "::" in t})
    return [f for f in files if f.rsplit("/", 1)[-1].startswith("test_") or f.endswith("_test.py")]


def from_swesmith(row: Mapping[str, Any], opts: ConvertOptions) -> Task:
    instance_id = c.req_str(row, "instance_id")
    repo = c.req_str(row, "repo")
    base_commit = c.req_str(row, "base_commit")
    f2p = c.str_list(row, "FAIL_TO_PASS")
    p2p = c.str_list(row, "PASS_TO_PASS")
    files = test_files_of(f2p + p2p)
    cmd = opts.test_cmd or TEST_CMD
    return Task(
        id=instance_id,
        source_format="swesmith",
        repo=repo,
        base_commit=base_commit,
        problem_statement=c.req_str(row, "problem_statement"),
        image=swesmith_image(c.req_str(row, "image_name"), namespace=opts.swesmith_namespace),
        workdir=opts.workdir,
        setup_commands=[f"git checkout -q {shlex.quote(base_commit)}"],
        env={"PATH": c.CONDA_PATH},
        gold_patch=reverse_patch(c.req_str(row, "patch")),
        test_files=files,
        eval_script=f"{ACTIVATE}\n{cmd} {' '.join(shlex.quote(f) for f in files)}\n",
        eval_timeout=opts.eval_timeout,
        grader="swesmith",
        plugin_autoload=True,
        log_parser=grading.parser_for(repo),
        fail_to_pass=f2p,
        pass_to_pass=p2p,
        created_at=c.opt_str(row, "created_at"),
        metadata={"bug_patch": row["patch"]},
        original=c.original(row),
    )
