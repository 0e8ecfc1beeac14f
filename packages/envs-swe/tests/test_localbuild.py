"""Install specs, what can be built with uv, and telling network failures from broken tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchgym_envs.localbuild import EnvSpec, buildable, load_specs, network_failures
from patchgym_envs.localbuild.envs import EnvBuilder, pip_names
from patchgym_envs.localbuild.errors import BuildFailed


def test_harness_table_has_swebench_repos() -> None:
    table = load_specs(None)
    assert table.source.startswith("swebench==4.1.0")
    spec = table.lookup("pydicom/pydicom", "2.0")
    assert spec is not None and spec.install == "python -m pip install -e ."
    assert table.lookup("pydicom/pydicom", "0.0") is None
    assert table.lookup("nobody/nothing", "1.0") is None


def test_user_specs_overlay_the_harness(tmp_path: Path) -> None:
    path = tmp_path / "specs.yaml"
    path.write_text('repos:\n  pydicom/pydicom:\n    versions:\n      "2.0": {python: "3.11"}\n')
    table = load_specs(path)
    assert table.lookup("pydicom/pydicom", "2.0").python == "3.11"  # type: ignore[union-attr]
    assert table.lookup("pydicom/pydicom", "2.1") is not None  # the rest of the harness stays


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"python": "3.9", "packages": "environment.yml"}, "conda-only environment"),
        (
            {"python": "3.9", "pre_install": ["apt-get install -y libxml2"]},
            "needs system packages (apt-get",
        ),
        ({"python": "3.9", "packages": "requirements.txt"}, "names no requirements file"),
        ({"python": "3.9", "install": "conda install -y foo"}, "needs system packages (conda"),
    ],
)
def test_unbuildable_specs_say_why(spec: dict[str, object], reason: str) -> None:
    assert reason in (buildable(EnvSpec.model_validate(spec)) or "")


def test_buildable_spec() -> None:
    assert (
        buildable(EnvSpec(python="3.11", pip_packages=["pytest"], install="pip install -e ."))
        is None
    )


def test_harness_table_counts() -> None:
    """Every version is either buildable here or refused with a reason; never silently skipped."""
    table = load_specs(None)
    reasons = [
        buildable(table.lookup(repo, v))  # type: ignore[arg-type]
        for repo, entry in table.repos.items()
        for v in entry["versions"]
    ]
    assert any(r is None for r in reasons) and any(r for r in reasons)


def test_pip_names_from_conda_pins() -> None:
    assert pip_names("numpy=1.19 scipy pytest==7.0") == ["numpy==1.19", "scipy", "pytest==7.0"]


def test_network_failures_from_short_summary() -> None:
    log = (
        "PASSED tests/test_a.py::test_ok\n"
        "FAILED tests/test_a.py::test_dl - urllib.error.URLError: <urlopen error [Errno -3] "
        "Temporary failure in name resolution>\n"
        "FAILED tests/test_a.py::test_bug - AssertionError: 1 != 2\n"
    )
    assert list(network_failures(log)) == ["tests/test_a.py::test_dl"]
    bug_only = log.replace("urllib.error.URLError", "KeyError").replace(
        "Temporary failure in name resolution", "x"
    )
    assert network_failures(bug_only, ["tests/test_a.py::test_bug"]) == {}


def test_network_evidence_at_import_time() -> None:
    """pydicom fetches test data at import; the failing test only sees None."""
    log = (
        "FAILED t.py::test_read\n"
        "  data_manager.py:304: UserWarning: A download failure occurred while attempting "
        "to retrieve color-pl.dcm\n"
    )
    found = network_failures(log, ["t.py::test_read"])
    assert list(found) == ["t.py::test_read"] and "download failure" in found["t.py::test_read"]
    assert network_failures("FAILED t.py::test_read\n", ["t.py::test_read"]) == {}


def test_a_failed_build_leaves_nothing(tmp_path: Path) -> None:
    spec = EnvSpec(python="3.11", pip_packages=["patchgym-no-such-package-xyz==0.0.0"])
    builder = EnvBuilder(tmp_path)
    with pytest.raises(BuildFailed, match="uv pip install"):
        builder.build(spec, "x/y", tmp_path, "/testbed")
    assert not (tmp_path / "envs" / spec.key("x/y")).exists()
    assert builder.get(spec.key("x/y")) is None


def test_network_tests_leave_the_test_lists() -> None:
    from patchgym_envs import Task
    from patchgym_envs.localbuild.probe import without_network_tests

    task = Task(
        id="t", source_format="swebench", problem_statement="p", eval_script="true",
        fail_to_pass=["a"], pass_to_pass=["b", "dl"],
    )  # fmt: skip
    marked = without_network_tests(task, {"dl": "URLError: no network"})
    assert marked.pass_to_pass == ["b"] and marked.fail_to_pass == ["a"]
    assert marked.metadata["network_tests"] == {"dl": "URLError: no network"}
    assert without_network_tests(task, {}) is task
