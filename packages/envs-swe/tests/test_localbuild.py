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


PYDICOM_LOG = """\
============================= test session starts ==============================
pydicom/data/data_manager.py:304: UserWarning: A download failure occurred while attempting to retrieve color-pl.dcm
=================================== FAILURES ===================================
__________________________ TestReader.test_read_color __________________________

self = <test_filereader.TestReader object>

    def test_read_color(self):
>       ds = dcmread(get_testdata_file("color-pl.dcm"))
E       TypeError: expected str, bytes or os.PathLike object, not NoneType

pydicom/tests/test_filereader.py:88: TypeError
_____________________________ test_fetch_all_files _____________________________

    def test_fetch_all_files():
>       fetch_data_files()
pydicom/data/data_manager.py:120: in fetch_data_files
    raise RuntimeError(msg)
E   urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>

pydicom/tests/test_data_manager.py:40: URLError
____________________ ERROR at setup of TestDownload.test_get ____________________
E   requests.exceptions.ConnectionError: HTTPSConnectionPool(host='github.com', port=443)
=============================== warnings summary ===============================
pydicom/tests/test_x.py::test_y
  A download failure occurred while attempting to retrieve rtplan.dcm
=========================== short test summary info ============================
FAILED pydicom/tests/test_filereader.py::TestReader::test_read_color - TypeError: expected str
FAILED pydicom/tests/test_data_manager.py::test_fetch_all_files - RuntimeError
ERROR pydicom/tests/test_data_manager.py::TestDownload::test_get
FAILED pydicom/tests/test_y.py::test_setup_nose - AttributeError: no setup
"""


def test_network_evidence_is_each_tests_own() -> None:
    """A download warning elsewhere in the log blames no test; a test's own traceback does."""
    found = network_failures(PYDICOM_LOG)
    assert sorted(found) == [
        "pydicom/tests/test_data_manager.py::TestDownload::test_get",
        "pydicom/tests/test_data_manager.py::test_fetch_all_files",
    ]
    assert (
        "Temporary failure in name resolution"
        in found["pydicom/tests/test_data_manager.py::test_fetch_all_files"]
    )
    assert (
        "HTTPSConnectionPool" in found["pydicom/tests/test_data_manager.py::TestDownload::test_get"]
    )
    # restricted to the tests that failed under gold
    only = ["pydicom/tests/test_filereader.py::TestReader::test_read_color"]
    assert network_failures(PYDICOM_LOG, only) == {}
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


def test_env_key_holds_python_and_date() -> None:
    from patchgym_envs.localbuild.envs import env_key

    spec = EnvSpec(python="3.9", pip_packages=["pytest"])
    keys = {
        env_key(spec, "a/b", "3.9", "2020-05-01T00:00:00Z"),
        env_key(spec, "a/b", "3.11", "2020-05-01T00:00:00Z"),
        env_key(spec, "a/b", "3.9", "2021-05-01T00:00:00Z"),
        env_key(spec, "a/b", "3.9", None),
    }
    assert len(keys) == 4
    assert EnvBuilder(Path("/x"), python_override="3.11").key(spec, "a/b", None) == env_key(
        spec, "a/b", "3.11", None
    )


def test_spec_pins_outlive_the_date_and_pip_runs_dated() -> None:
    from patchgym_envs.localbuild.envs import date_args, dated_pip, pinned_names

    assert pinned_names(["pytest==7.4.4", "numpy", "attrs>=20", "six == 1.16"]) == [
        "pytest",
        "six",
    ]
    args = date_args("2020-05-01T00:00:00Z", ["pytest"])
    assert args[:2] == ["--exclude-newer", "2020-05-01T00:00:00Z"]
    assert "pytest=2999-01-01T00:00:00Z" in args
    assert date_args(None, ["pytest"]) == []
    cmd = dated_pip("python -m pip install -e . && pip install foo", "/e/bin/python", args[:2])
    assert cmd.count("uv pip install --python /e/bin/python --exclude-newer 2020-05-01") == 2
    assert "setuptools=2999-01-01T00:00:00Z" in cmd
    assert dated_pip("python -m pip install -e .", "/p", []) == "python -m pip install -e ."


def test_resolution_date_is_the_row_day() -> None:
    from patchgym_envs import Task
    from patchgym_envs.localbuild.build import resolution_date

    task = Task(
        id="t", source_format="swebench", problem_statement="p", eval_script="true",
        created_at="2020-05-01T17:03:02Z",
    )  # fmt: skip
    assert resolution_date(task, None) == "2020-05-01T00:00:00Z"
    assert resolution_date(task, "2019-01-01") == "2019-01-01"
    assert resolution_date(task, "none") is None
    assert resolution_date(task.model_copy(update={"created_at": None}), None) is None
