"""Images pulled as-is through the console script: prepared before the first episode
(a failure is one line naming the image, with its exit code), and ``sandboxes reap
--images`` (its options; what it removes is tested on the engine in patchgym-sandbox-docker)."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

import pytest

from patchgym_envs import bundled_task
from patchgym_trainer.cli import main
from patchgym_trainer.commands.sandboxes import parse_age
from patchgym_trainer.errors import ConfigError


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as code:
        main(argv)
    out = capsys.readouterr()
    return int(code.value.code or 0), out.out, out.err


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("90s", 90.0), ("30m", 1800.0), ("12h", 43200.0), ("7d", 604800.0)],
)
def test_ages(text: str, seconds: float) -> None:
    assert parse_age(text) == seconds


def test_a_bad_age_names_the_option() -> None:
    with pytest.raises(ConfigError, match="--older-than '3 weeks'"):
        parse_age("3 weeks")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--images", "--run", "r1"], "takes no --run"),
        (["--images", "--older-than", "soon"], "--older-than 'soon'"),
        (["--older-than", "7d", "--expired"], "use it with --images"),
    ],
)
def test_reap_images_option_errors_are_one_line(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["sandboxes", "reap", *argv], capsys)
    assert code == 2 and needle in err and "Traceback" not in err, err


def test_reap_images_on_a_backend_that_derives_none(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["sandboxes", "reap", "--images", "--dry-run"], capsys)
    assert code == 0, err
    assert "would remove 0 derived images on local" in " ".join(out.split())


def missing_image_dataset(tmp_path: Path) -> tuple[str, list[str]]:
    """A one-task dataset whose image (named like SWE-bench's) is absent; its overrides."""
    pytest.importorskip("patchgym_docker")
    import docker

    from patchgym_sandbox.testing import engine_missing

    try:
        docker.from_env(timeout=10).ping()
    except Exception as exc:
        engine_missing(f"no Docker engine reachable ({exc})")
    image = f"local/sweb.eval.x86_64.patchgym-missing-{uuid.uuid4().hex[:10]}:1"
    row = bundled_task("semverlib").model_copy(update={"image": image, "template": None})
    (tmp_path / "t.jsonl").write_text(json.dumps(row.model_dump(mode="json")) + "\n")
    return image, ["sandbox=docker", "dataset=file", f"dataset.path={tmp_path / 't.jsonl'}"]


async def test_train_prepares_the_dataset_images_before_the_engine(tmp_path: Path) -> None:
    from rich.console import Console

    from patchgym_envs.errors import ImageCleanInfraError
    from patchgym_trainer.commands.train import prepare_run_images
    from patchgym_trainer.compose import compose

    assert await prepare_run_images(compose([]), Console(file=io.StringIO())) == 0  # local
    image, overrides = missing_image_dataset(tmp_path)
    with pytest.raises(ImageCleanInfraError, match="could not be reduced") as failed:
        await prepare_run_images(compose(overrides), Console(file=io.StringIO()))
    assert list(failed.value.failures) == [image]


def test_validate_prepares_images_first_and_names_a_missing_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image, overrides = missing_image_dataset(tmp_path)
    code, _, err = run(["validate", *overrides, "--out", str(tmp_path / "out")], capsys)
    assert code == 4, err  # the backend's fault: the environment exit code
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and image in lines[0] and "could not be reduced" in lines[0], err
