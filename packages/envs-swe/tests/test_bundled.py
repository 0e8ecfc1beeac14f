"""Every bundled task: resolved by its gold patch, not by an empty patch (local backend)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchgym_envs import bundled_names, bundled_task, bundled_tasks, evaluate_patch
from patchgym_envs.bundled.template import materialise

NAMES = bundled_names()


def test_at_least_six_in_both_forms() -> None:
    tasks = bundled_tasks()
    assert len(tasks) >= 6
    forms = {t.metadata["form"] for t in tasks}
    assert forms == {"r2egym", "swebench"}
    assert all(t.expected_output_json for t in tasks if t.metadata["form"] == "r2egym")
    assert all(
        t.fail_to_pass and t.pass_to_pass and t.test_patch
        for t in tasks
        if t.metadata["form"] == "swebench"
    )
    assert any(t.metadata.get("needs_debugger") for t in tasks)


def test_lookup_by_name_or_id() -> None:
    assert bundled_task("ledger").id == "patchgym__ledger-1"
    assert bundled_task("patchgym__ledger-1").id == "patchgym__ledger-1"
    with pytest.raises(LookupError, match="bundled: csvlite"):
        bundled_task("nope")


def test_base_commit_is_deterministic(tmp_path: Path) -> None:
    for name in NAMES:
        first = materialise(name, tmp_path / "a")
        second = materialise(name, tmp_path / "b")
        assert first[1] == second[1] == bundled_task(name).base_commit
        assert first[0] != second[0]


def test_materialised_once_per_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every episode's sandbox start asks for its template: after the first, no git runs
    and no source is read (they blocked the event loop under many episodes), unless the
    folder was deleted meanwhile."""
    from patchgym_envs.bundled import template

    first = materialise("csvlite", tmp_path)
    calls: list[tuple[str, ...]] = []
    real = template._git
    monkeypatch.setattr(template, "_git", lambda cwd, *a: calls.append(a) or real(cwd, *a))
    assert materialise("csvlite", tmp_path) == first and calls == []
    shutil.rmtree(first[0])
    assert materialise("csvlite", tmp_path) == first and calls  # rebuilt, same commit


def test_hidden_tests_not_in_template() -> None:
    for task in bundled_tasks():
        root, _ = materialise(task.metadata["bundled_name"])
        for path in task.hidden_files:
            assert not (root / path).exists()
        assert not (root / "r2e_tests").exists()


@pytest.mark.parametrize("name", NAMES)
async def test_gold_resolves_empty_does_not(name: str, backend) -> None:
    task = bundled_task(name)
    gold = await evaluate_patch(task, task.gold_patch, backend)
    assert gold.infra_error is None, gold.infra_error
    assert gold.resolved, gold.model_dump_json(indent=1)
    assert gold.reward == 1.0
    empty = await evaluate_patch(task, "", backend)
    assert empty.infra_error is None, empty.infra_error
    assert not empty.resolved
    assert empty.reward == 0.0
    assert await backend.list_sandboxes() == []


async def test_patch_that_does_not_apply_grades_zero(backend) -> None:
    task = bundled_task("intervals")
    verdict = await evaluate_patch(
        task, task.gold_patch.replace("start < merged", "start << merged"), backend
    )
    assert not verdict.resolved and verdict.rejected and "did not apply" in verdict.rejected
