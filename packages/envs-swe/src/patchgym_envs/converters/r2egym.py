"""R2E-Gym rows: its own tasks (Lite / Subset / V1) and SWE-bench in R2E-Gym's form.

R2E-Gym tasks (``R2E-Gym/R2E-Gym-Lite``, ``-Subset``, ``-V1``; same columns):
``repo_name``, ``docker_image``, ``commit_hash`` (the fixing commit),
``parsed_commit_content`` (JSON text of the parsed commit: file diffs with hunks),
``execution_result_content``, ``modified_files``, ``modified_entity_summaries``,
``relevant_files``, ``num_non_test_files``, ``num_non_test_func_methods``,
``num_non_test_lines``, ``prompt``, ``problem_statement``, ``expected_output_json``.
The image holds the repository at the parent commit in ``/testbed`` with
``run_tests.sh`` in it and the hidden tests in ``/r2e_tests``; setup moves both out of
the agent's sight (as R2E-Gym does) and grading links the tests back for the run.

SWE-bench in R2E-Gym's form (``R2E-Gym/SWE-Bench-Lite``, ``-Verified``): the princeton
columns plus ``parsed_commit`` (JSON), ``run_tests`` (the harness's eval script, which
resets test files and applies the test patch itself) and ``docker_image``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from patchgym_envs import grading
from patchgym_envs.converters import common as c
from patchgym_envs.converters.options import ConvertOptions
from patchgym_envs.errors import RowError
from patchgym_envs.patches import diff_files, render_parsed_commit
from patchgym_envs.task import Task

R2E_SETUP = [
    "[ -e /root/.venv ] || ln -s /testbed/.venv /root/.venv",
    "mv /r2e_tests /root/r2e_tests 2>/dev/null || true",
    "mv run_tests.sh /root/run_tests.sh 2>/dev/null || true",
]
R2E_EVAL = (
    "ln -sfn /root/r2e_tests r2e_tests\nbash /root/run_tests.sh\nrc=$?\nrm -f r2e_tests\nexit $rc\n"
)
SWEBENCH_R2E_SETUP = ["rm -f /run_tests.sh"]
_ISSUE = re.compile(r"\[ISSUE\](.*)\[/ISSUE\]", re.DOTALL)


def issue_text(problem_statement: str) -> str:
    """R2E-Gym wraps the issue in ``[ISSUE]...[/ISSUE]``; the agent is shown the inside."""
    m = _ISSUE.search(problem_statement)
    return m.group(1).strip() + "\n" if m else problem_statement


def _parsed_commit(row: Mapping[str, Any], name: str) -> dict[str, Any]:
    commit = c.json_object(row, name)
    if not isinstance(commit.get("file_diffs"), list):
        raise RowError(name, "has no 'file_diffs' list (not an R2E-Gym parsed commit)")
    return commit


def from_r2egym(row: Mapping[str, Any], opts: ConvertOptions) -> Task:
    repo = c.req_str(row, "repo_name")
    commit_hash = c.req_str(row, "commit_hash")
    commit = _parsed_commit(row, "parsed_commit_content")
    expected = c.req_str(row, "expected_output_json")
    grading.check_expected_output(expected, field="expected_output_json")
    gold = render_parsed_commit(commit, tests=False, non_tests=True)
    if not gold.strip():
        raise RowError("parsed_commit_content", "has no non-test Python file diff (no gold patch)")
    return Task(
        id=f"{repo}__{commit_hash[:12]}" if "instance_id" not in row else str(row["instance_id"]),
        source_format="r2egym",
        repo=repo,
        base_commit=commit.get("old_commit_hash") or None,
        problem_statement=issue_text(c.req_str(row, "problem_statement")),
        image=c.req_str(row, "docker_image"),
        workdir=opts.workdir,
        setup_commands=list(R2E_SETUP),
        env={"PATH": c.R2E_PATH},
        gold_patch=gold,
        test_patch=render_parsed_commit(commit, tests=True, non_tests=False),
        stage_test_patch=False,
        eval_script=R2E_EVAL,
        eval_timeout=opts.eval_timeout,
        grader="r2e",
        plugin_autoload=True,
        log_parser="r2e",
        expected_output_json=expected,
        metadata={
            "commit_hash": commit_hash,
            **{
                k: c.jsonable(row[k])
                for k in (
                    "modified_files",
                    "relevant_files",
                    "num_non_test_files",
                    "num_non_test_lines",
                )
                if row.get(k) is not None
            },
        },
        original=c.original(row),
    )


def from_swebench_r2e(row: Mapping[str, Any], opts: ConvertOptions) -> Task:
    instance_id = c.req_str(row, "instance_id")
    repo = c.req_str(row, "repo")
    _parsed_commit(row, "parsed_commit")
    test_patch = c.req_str(row, "test_patch")
    existing, created = diff_files(test_patch)
    return Task(
        id=instance_id,
        source_format="swebench_r2e",
        repo=repo,
        base_commit=c.req_str(row, "base_commit"),
        problem_statement=c.req_str(row, "problem_statement"),
        image=c.req_str(row, "docker_image"),
        workdir=opts.workdir,
        setup_commands=list(SWEBENCH_R2E_SETUP),
        env={"PATH": c.CONDA_PATH},
        gold_patch=c.req_str(row, "patch"),
        test_patch=test_patch,
        stage_test_patch=False,
        test_files=existing,
        new_test_files=created,
        eval_script=c.req_str(row, "run_tests"),
        eval_timeout=opts.eval_timeout,
        grader="swebench",
        plugin_autoload=True,
        log_parser=grading.parser_for(repo),
        fail_to_pass=c.str_list(row, "FAIL_TO_PASS"),
        pass_to_pass=c.str_list(row, "PASS_TO_PASS"),
        version=c.opt_str(row, "version"),
        created_at=c.opt_str(row, "created_at"),
        hints=c.opt_str(row, "hints_text", "") or "",
        metadata={
            k: c.jsonable(row[k])
            for k in ("environment_setup_commit", "difficulty")
            if row.get(k) is not None
        },
        original=c.original(row),
    )
