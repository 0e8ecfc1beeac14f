"""``build-local --for k8s`` options: a bad value is a config error (exit 2) naming the
choices. Loading into a cluster is tested as command construction in envs-swe
(``test_localbuild_cluster.py``); no containerd node runs here."""

from __future__ import annotations

from pathlib import Path

import pytest
from plain_venv import cli


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--for", "k9s", "expected local, docker or k8s"),
        ("--node-runtime", "cri-o", "expected containerd or docker"),
    ],
)
def test_bad_values_name_the_choices(
    option: str, value: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli(["datasets", "build-local", "--out", str(tmp_path / "o"), option, value])
    assert code == 2
    err = capsys.readouterr().err
    assert f"{option} {value!r}" in err and says in err
