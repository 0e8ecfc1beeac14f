"""The in-sandbox supervisor under every CPython an image may ship (3.6 to 3.13, where pyenv
has them), on its fast path (``_posixsubprocess.fork_exec`` with that release's signature)
and on its fallback (``subprocess``), and the modules the exec server loads at all: it
must start without ``subprocess``, ``json``, ``re``, ``enum`` or ``threading`` (each
sandbox's start paid ~12-18 ms for them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchgym_sandbox import supervisor
from patchgym_sandbox.remote import server_source, supervisor_source

PYENV = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"


def _interpreters() -> list[object]:
    found: list[object] = [pytest.param(sys.executable, id="current")]
    for minor in range(6, 14):
        matches = sorted(PYENV.glob(f"3.{minor}.*/bin/python3.{minor}"))
        found.append(
            pytest.param(
                str(matches[-1]) if matches else f"python3.{minor}",
                id=f"py3.{minor}",
                marks=pytest.mark.skipif(not matches, reason=f"no Python 3.{minor} under {PYENV}"),
            )
        )
    return found


PROBE = """
import json, os, sys
sup = {"__name__": "patchgym_supervisor"}
exec(compile(sys.stdin.read(), "patchgym_supervisor", "exec"), sup)
if sys.argv[1] == "fallback":
    sup["_FORK_EXEC"][0] = None
fast = sup["_FORK_EXEC"][0] is not None
env = dict(os.environ)

def run(cmd, **kw):
    got = []
    status = sup["supervise"](cmd, lambda s, d: got.append([s, d.decode()]), env=env, **kw)
    out = "".join(d for s, d in got if s == 1)
    err = "".join(d for s, d in got if s == 2)
    return [status["exit_code"], status["timed_out"], out, err]

report = {
    "fast": fast,
    "io": run('read x; echo "out $x"; echo err >&2; exit 3', stdin=b"fed\\n", timeout=30),
    "signal": run("kill -9 $$", timeout=30),
    "timeout": run("sleep 30", timeout=0.2),
    "session": run("ps -o sid= -p $$; ps -o pid= -p $$", timeout=30),
    "fds": run("ls /proc/self/fd | wc -l", timeout=30),
}
try:
    run("true", cwd="/nonexistent-dir")
    report["cwd"] = None
except OSError as exc:
    report["cwd"] = [exc.errno, exc.filename]
sys.stdout.write(json.dumps(report))
"""


@pytest.mark.parametrize("python", _interpreters())
@pytest.mark.parametrize("path", ["fast", "fallback"])
def test_commands_run_alike_on_every_python_and_path(python: str, path: str) -> None:
    proc = subprocess.run(
        [python, "-I", "-S", "-c", PROBE, path],
        input=supervisor_source(),
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    report = json.loads(proc.stdout)
    assert report["fast"] is (path == "fast")
    assert report["io"] == [3, False, "out fed\n", "err\n"]
    assert report["signal"][:2] == [128 + 9, False]
    assert report["timeout"][:2] == [124, True]
    sid, pid = report["session"][2].split()
    assert sid == pid  # a session of its own
    assert report["fds"][2].strip() == "4"  # 0-2 and the one ls opened: nothing inherited
    assert report["cwd"] == [2, "/nonexistent-dir"]


def test_a_python_without_a_known_fork_exec_uses_subprocess() -> None:
    real = supervisor._FORK_EXEC[0]
    supervisor._FORK_EXEC[0] = None
    try:
        child = supervisor.start_child(
            ["bash", "-c", "exit 5"], None, None, dict(os.environ), 0, 1, 2
        )
        assert child.popen is not None
        assert child.wait() == 5
    finally:
        supervisor._FORK_EXEC[0] = real


def test_the_exec_server_loads_no_heavy_module() -> None:
    probe = (
        "import sys\n"
        "ns = {'__name__': 'patchgym_serve'}\n"
        "exec(compile(sys.argv[1], 'patchgym_serve', 'exec'), ns)\n"
        "sup = ns['load_supervisor'](sys.argv[2])\n"
        "out = []\n"
        "sup['supervise']('echo hi', lambda s, d: out.append(d), env={'PATH': '/usr/bin:/bin'})\n"
        "sup['json_dumps'](sup['json_loads']('{\"a\": 1}'))\n"
        "assert out == [b'hi\\n'], out\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe, server_source(), supervisor_source().decode()],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    loaded = set(proc.stdout.split())
    heavy = {"subprocess", "json", "re", "enum", "threading", "selectors", "signal", "typing"}
    assert not loaded & heavy, sorted(loaded & heavy)


@pytest.mark.parametrize(
    "text",
    [
        '{"cmd": "echo \\u00e9 \\"q\\"", "env": {"A": "1"}, "timeout": 2.5, "stdin": null}',
        '{"cap": 1048576, "idle_timeout": 0, "cwd": "/w", "flags": [true, false]}',
        '  {"n": -1e-3, "big": 12345678901234567890, "inf": Infinity}\n',
        "[]",
    ],
)
def test_requests_parse_as_json_parses_them(text: str) -> None:
    assert supervisor.json_loads(text) == json.loads(text)


@pytest.mark.parametrize("text", ['{"a": 1} x', '{"a": ', "", "nul"])
def test_a_bad_request_is_a_value_error_that_shows_it(text: str) -> None:
    with pytest.raises(ValueError):
        supervisor.json_loads(text)


def test_statuses_are_written_as_json_writes_them() -> None:
    status = {
        "exit_code": 124,
        "timed_out": True,
        "idle_timed_out": False,
        "duration_s": 0.30266,
        "note": 'caf\u00e9 "x"\n',
        "none": None,
    }
    assert supervisor.json_dumps(status) == json.dumps(status)
    odd = {"nan": float("nan"), "inf": float("inf"), "ninf": float("-inf")}
    assert supervisor.json_dumps(odd) == json.dumps(odd)
    with pytest.raises(TypeError, match="not a JSON scalar"):
        supervisor.json_dumps({"list": [1]})
