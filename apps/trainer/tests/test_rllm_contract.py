"""rLLM adapters against rLLM's documented method names and signatures.

CI cannot install rLLM (not on PyPI), so the contract is written down here from rLLM's
source at the pinned refs (``rllm/sandbox/protocol.py``, ``rllm/agents/agent.py``,
``rllm/environments/base/base_env.py``, ``rllm/workflows/workflow.py``) and checked
structurally; the sandbox adapter needs no rLLM and runs for real on the local backend.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import subprocess
from pathlib import Path

import pytest

from patchgym_envs import SWEEnv, bundled_task
from patchgym_sandbox import SyncBackend
from patchgym_trainer.engines.rllm.sandbox_adapter import RLLMSandbox

SRC = Path(__file__).parents[1] / "src" / "patchgym_trainer" / "engines" / "rllm"

# rllm.sandbox.protocol.Sandbox (name -> parameter names after self)
SANDBOX_PROTOCOL = {
    "exec": ["command", "timeout", "user"],
    "upload_file": ["local_path", "remote_path"],
    "upload_dir": ["local_path", "remote_path"],
    "close": [],
    "is_alive": [],
}
# rllm.agents.agent.BaseAgent (v0.2.1 and current)
AGENT_METHODS = {
    "update_from_env": ["observation", "reward", "done", "info", "**kwargs"],
    "update_from_model": ["response", "**kwargs"],
    "reset": [],
    "get_current_state": [],
}
AGENT_PROPERTIES = {"chat_completions", "trajectory"}
# rllm.environments.base.base_env.BaseEnv
ENV_METHODS = {"reset", "step", "close", "from_dict", "is_multithread_safe"}
# rllm.workflows.workflow.Workflow.run
WORKFLOW_RUN = ["task", "uid", "**kwargs"]


def params(fn: object) -> list[str]:
    out = []
    for p in inspect.signature(fn).parameters.values():  # type: ignore[arg-type]
        if p.name == "self":
            continue
        out.append(f"**{p.name}" if p.kind is p.VAR_KEYWORD else p.name)
    return out


def ast_class(path: Path, name: str) -> ast.ClassDef:
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise AssertionError(f"{name} not defined in {path}")


def ast_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    names = [a.arg for a in fn.args.args if a.arg != "self"]
    if fn.args.kwarg is not None:
        names.append(f"**{fn.args.kwarg.arg}")
    return names


def methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_sandbox_adapter_matches_protocol() -> None:
    for name, expected in SANDBOX_PROTOCOL.items():
        assert params(getattr(RLLMSandbox, name)) == expected, name


def test_agent_matches_base_agent() -> None:
    cls = ast_class(SRC / "env_agent.py", "PatchgymSWEAgent")
    assert [b.id for b in cls.bases if isinstance(b, ast.Name)] == ["BaseAgent"]
    found = methods(cls)
    for name, expected in AGENT_METHODS.items():
        assert ast_params(found[name]) == expected, name
    for prop in AGENT_PROPERTIES:
        decos = [d.id for d in found[prop].decorator_list if isinstance(d, ast.Name)]
        assert decos == ["property"], prop


def test_env_matches_base_env() -> None:
    cls = ast_class(SRC / "env_agent.py", "PatchgymSWEEnv")
    assert [b.id for b in cls.bases if isinstance(b, ast.Name)] == ["SWEEnv", "BaseEnv"]
    for name in ENV_METHODS:
        assert callable(getattr(SWEEnv, name)), name
    # rLLM calls env_class.from_dict(row) and env_class.is_multithread_safe() on the class
    assert isinstance(inspect.getattr_static(SWEEnv, "from_dict"), (staticmethod, classmethod))
    assert isinstance(inspect.getattr_static(SWEEnv, "is_multithread_safe"), staticmethod)
    assert isinstance(inspect.getattr_static(SWEEnv, "idx"), property)
    assert params(SWEEnv.from_dict) == ["info"]
    assert params(SWEEnv.step) == ["action"]

    class Sub(SWEEnv):
        pass

    env = Sub.from_dict({**bundled_task("romanum").to_row(), "idx": 3, "max_steps": 5})
    assert type(env) is Sub and env.idx == 3 and env.config.max_steps == 5
    obs, _ = env.reset()
    assert obs == bundled_task("romanum").problem_statement
    env.close()


def test_workflow_matches_workflow_run() -> None:
    cls = ast_class(SRC / "workflow.py", "PatchgymSWEWorkflow")
    assert [b.id for b in cls.bases if isinstance(b, ast.Name)] == ["Workflow"]
    run = methods(cls)["run"]
    assert isinstance(run, ast.AsyncFunctionDef)
    assert ast_params(run) == WORKFLOW_RUN
    source = ast.unparse(run)
    # the shared driver owns the loop: it grades cutoffs and closes the sandbox on every path
    assert "EpisodeDriver(" in source
    # AgentWorkflowEngine calls run() without reset(): run resets itself, first thing
    first = run.body[0]
    assert isinstance(first, ast.Expr) and ast.unparse(first) == "self.reset(task=task, uid=uid)"
    assert "asyncio.run" not in (SRC / "workflow.py").read_text()


def test_multi_turn_workflow_is_the_shared_driver() -> None:
    """``MultiTurnWorkflow``'s constructor, the driver's loop: no episode loop of its own."""
    cls = ast_class(SRC / "workflow.py", "PatchgymMultiTurnWorkflow")
    assert [b.id for b in cls.bases if isinstance(b, ast.Name)] == ["MultiTurnWorkflow"]
    run = methods(cls)["run"]
    assert isinstance(run, ast.AsyncFunctionDef)
    assert ast_params(run) == WORKFLOW_RUN
    assert "EpisodeDriver(" in ast.unparse(run)
    first = run.body[0]  # the stock workflow's reset, through the executor
    assert ast.unparse(first) == "await self.timed_env_call(self.reset, task=task, uid=uid)"


def test_no_workflow_loops_over_turns() -> None:
    """Every episode loop is the driver's: no ``for``/``while`` in an rLLM adapter's run."""
    for name in ("PatchgymSWEWorkflow", "PatchgymMultiTurnWorkflow"):
        run = methods(ast_class(SRC / "workflow.py", name))["run"]
        loops = [n for n in ast.walk(run) if isinstance(n, (ast.For, ast.AsyncFor, ast.While))]
        assert not loops, name


def test_env_adapter_raises_infra_failures() -> None:
    cls = ast_class(SRC / "env_agent.py", "PatchgymSWEEnv")
    found = methods(cls)
    for name in ("step", "compute_final_reward"):
        assert "raise InfraEpisodeError" in ast.unparse(found[name]), name


def test_infra_rule_reads_the_env_verdict() -> None:
    from patchgym_trainer.engines.infra_rule import InfraEpisodeError, infra_error_of

    assert infra_error_of({"reward_valid": True, "resolved": False}) is None
    assert infra_error_of(None) is None
    assert infra_error_of({"infra_error": "SandboxLost: gone"}) == "SandboxLost: gone"
    assert infra_error_of({"reward_valid": False}) == "reward_valid=False"
    err = InfraEpisodeError("SandboxLost: gone", task_id="t1")
    assert isinstance(err, RuntimeError) and "t1" in str(err)


def test_step_action_is_a_json_value() -> None:
    tree = ast.parse((SRC / "env_agent.py").read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "json_action")
    ns: dict[str, object] = {"Any": object}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "json_action", "exec"), ns)
    json_action = ns["json_action"]
    from patchgym_agents.types import Action
    from patchgym_envs.tools import ToolCall

    call = Action(action=ToolCall(name="execute_bash", arguments={"cmd": "ls"}))
    assert json_action(call) == {"name": "execute_bash", "arguments": {"cmd": "ls"}, "id": None}  # type: ignore[operator]
    assert json_action(Action(action="", format_error="x")) == ""  # type: ignore[operator]


@pytest.mark.skipif(importlib.util.find_spec("rllm") is not None, reason="rLLM is installed")
def test_without_rllm_the_error_names_the_install_line() -> None:
    from patchgym_trainer.errors import MissingExtra

    with pytest.raises(MissingExtra, match=r"git\+https://github\.com/rllm-org/rllm@"):
        import patchgym_trainer.engines.rllm.env_agent  # noqa: F401


def test_sandbox_adapter_on_the_local_backend(tmp_path: Path) -> None:
    task = bundled_task("romanum")
    from patchgym_envs.bundled import resolve_template

    local = tmp_path / "payload.txt"
    local.write_text("hello rllm\n")
    folder = tmp_path / "dir"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "f.txt").write_text("x")
    with SyncBackend({"type": "local"}) as backend:
        sb = RLLMSandbox.create(backend, template=resolve_template(task.template))
        try:
            assert sb.is_alive()
            assert sb.exec("echo hi") == "hi\n"
            with pytest.raises(subprocess.CalledProcessError) as info:
                sb.exec("echo out; echo err >&2; exit 3")
            assert info.value.returncode == 3 and "out" in info.value.output
            assert sb.exec("echo as-root", user="root") == "as-root\n"  # no users: ignored
            assert sb.exec("echo again", user="root") == "again\n"
            sb.upload_file(str(local), "payload.txt")
            assert sb.exec("cat payload.txt") == "hello rllm\n"
            sb.upload_dir(str(folder), "up")
            assert sb.exec("cat up/sub/f.txt") == "x"
            with pytest.raises(subprocess.TimeoutExpired):
                sb.exec("sleep 5", timeout=0.5)
        finally:
            sb.close()
        assert not sb.is_alive()
