"""A corpus of bad inputs through the console script: exit code, one line naming the culprit, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchgym_envs import bundled_task
from patchgym_trainer.cli import main

GOOD = bundled_task("semverlib").model_dump(mode="json")


def jsonl(*rows: object) -> bytes:
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in rows)


def with_(**fields: object) -> dict[str, object]:
    return {**GOOD, **fields}


def without(name: str) -> dict[str, object]:
    return {k: v for k, v in GOOD.items() if k != name}


# (case id, file name, content, extra overrides, exit code, substrings of the one line)
DATA: list[tuple[str, str, bytes, list[str], int, list[str]]] = [
    ("not-json", "a.jsonl", jsonl(GOOD, b"{oops"), [], 3, ["a.jsonl:2", "row 1", "not valid JSON"]),
    ("not-utf8", "a.jsonl", jsonl(GOOD, b'{"id": "\xff"}'), [], 3, ["a.jsonl:2", "not UTF-8"]),
    ("array-line", "a.jsonl", jsonl(b"[1, 2]"), [], 3, ["a.jsonl:1", "JSON object"]),
    ("deep-json", "a.jsonl", jsonl(b"[" * 200_000), [], 3, ["a.jsonl:1", "nested too deeply"]),
    (
        "missing-key",
        "a.jsonl",
        jsonl(without("eval_script")),
        [],
        3,
        ["a.jsonl:1", "'eval_script'"],
    ),
    (
        "wrong-type",
        "a.jsonl",
        jsonl(with_(problem_statement=5)),
        [],
        3,
        ["a.jsonl:1", "patchgym__semverlib-1", "'problem_statement'"],
    ),
    (
        "wrong-type-lenient",
        "a.jsonl",
        jsonl(with_(fail_to_pass=7)),
        ["dataset.strict=false"],
        3,
        ["all 1 rows skipped", "a.jsonl:1", "fail_to_pass"],
    ),
    ("unknown-columns", "a.jsonl", jsonl({"x": 1}), [], 3, ["a.jsonl:1", "dataset format"]),
    ("empty", "a.jsonl", b"", [], 3, ["a.jsonl", "empty"]),
    ("blank-lines", "a.jsonl", b"\n \n", [], 3, ["a.jsonl", "empty"]),
    ("corrupt-parquet", "a.parquet", b"PAR1" + b"\0" * 40, [], 3, ["a.parquet", "parquet"]),
    ("missing-file", "", b"", ["dataset.path=/nonexistent/x.jsonl"], 3, ["/nonexistent/x.jsonl"]),
]

CONFIG: list[tuple[str, list[str], int, list[str]]] = [
    ("sandbox-extra-key", ["+sandbox.bogus=1"], 2, ["bogus", "local"]),
    ("env-unknown-key", ["+env.bogus=1"], 2, ["env.bogus", "allowed under env:", "max_steps"]),
    ("env-override-missing", ["env.bogus=1"], 2, ["env.bogus", "allowed under env:"]),
    ("env-key-typo", ["env.max_step=3"], 2, ["did you mean `env.max_steps`?", "step_timeout_s"]),
    ("sandbox-key-typo", ["sandbox.isolatoin=none"], 2, ["did you mean `sandbox.isolation`?"]),
    (
        "sandbox-unknown-key",
        ["sandbox.bogus=1"],
        2,
        ["sandbox.bogus", "isolation, max_concurrency"],
    ),
    ("bad-choice", ["sandbox=dockr"], 2, ["allowed: ags, docker, k8s, local"]),
    ("bad-type", ["env.max_steps=many"], 2, ["env.max_steps"]),
    ("missing-path", ["dataset=file"], 2, ["dataset.path"]),
    ("bad-kubeconfig", ["sandbox=k8s", "+sandbox.kubeconfig=/nonexistent"], 2, ["kubeconfig"]),
]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as code:
        main(argv)
    return int(code.value.code or 0), capsys.readouterr().err


def check_one_line(err: str, needles: list[str]) -> None:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.mark.parametrize(
    ("name", "fname", "content", "extra", "code", "needles"), DATA, ids=[c[0] for c in DATA]
)
def test_bad_data(
    name: str,
    fname: str,
    content: bytes,
    extra: list[str],
    code: int,
    needles: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["validate", "dataset=file", "--out", str(tmp_path / "out")]
    if fname:
        (tmp_path / fname).write_bytes(content)
        args.append(f"dataset.path={tmp_path / fname}")
    got, err = run(args + extra, capsys)
    assert got == code, err
    check_one_line(err, needles)


@pytest.mark.parametrize(
    ("name", "overrides", "code", "needles"), CONFIG, ids=[c[0] for c in CONFIG]
)
def test_bad_config(
    name: str,
    overrides: list[str],
    code: int,
    needles: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    got, err = run(["validate", "--out", str(tmp_path), *overrides], capsys)
    assert got == code, err
    check_one_line(err, needles)


def test_debug_shows_the_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    got, err = run(["validate", "+sandbox.bogus=1", "--debug", "--out", str(tmp_path)], capsys)
    assert got == 2 and "Traceback" in err and "bogus" in err.splitlines()[-1]


def test_every_command_maps_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "a.jsonl"
    bad.write_bytes(b"{oops\n")
    for argv in (
        [
            "datasets",
            "convert",
            "dataset=file",
            f"dataset.path={bad}",
            "--out",
            str(tmp_path / "x.jsonl"),
        ],
        [
            "rollout",
            "dataset=file",
            f"dataset.path={bad}",
            "rollout.policy=gold",
            "--out",
            str(tmp_path / "r"),
        ],
    ):
        got, err = run(argv, capsys)
        assert got == 3, err
        check_one_line(err, ["a.jsonl:1"])


def test_unreachable_backend_is_exit_4(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("patchgym_docker")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    for argv in (
        ["validate", "sandbox=docker", "--out", str(tmp_path)],
        ["sandboxes", "list", "sandbox=docker"],
    ):
        got, err = run(argv, capsys)
        assert got == 4, err
        check_one_line(err, ["Docker engine"])
