"""``SWEAgent``: rLLM's agent contract over our scaffolds, parser and history.

The contract, as the one episode loop plays it (:class:`patchgym_agents.driver.EpisodeDriver`,
under every engine's adapter; rLLM v0.2's own execution engine calls the same methods)::

    agent.reset()
    agent.update_from_env(problem_statement, 0.0, False, info)   # task -> first prompt
    while not done:
        reply = model(agent.chat_completions, tools=agent.tools)
        action = agent.update_from_model(reply)                  # -> Action
        obs, reward, done, info = env.step(action)
        agent.update_from_env(obs, reward, done, info)

A malformed reply gives an :class:`Action` whose ``action`` is ``""`` (the environment
executes nothing and, as in rLLM, does not count it as a step); the observation then
shown to the model is the parser's explanation, and :attr:`SWEAgent.format_errors`
counts it.

rLLM's ``SWEAgent`` arguments are accepted with their meaning: ``use_fn_calling`` picks
the tool format (``True`` = native tool calls, ``False`` = ``<function=...>`` text),
``format_model_response`` stores the assistant turn as ``thought + canonical call``
instead of the raw reply, and ``prompts="rllm"`` uses rLLM's own SWE prompts (read from
the installed rLLM, see :mod:`patchgym_agents.prompts_rllm`) with its "Steps Remaining"
line on every observation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from patchgym_agents.envs_api import default_of
from patchgym_agents.history import ContextBudget, History, TokenCounter, approx_tokens
from patchgym_agents.parsing import FORMAT_HINT, ParseResult, parse_text, parse_tool_calls
from patchgym_agents.prompts_rllm import rllm_templates, steps_note
from patchgym_agents.scaffolds import AgentScaffold, ToolFormat, agent_scaffold
from patchgym_agents.types import Action, ModelReply, Step, Trajectory


class SWEAgent:
    """One agent per episode at a time; :meth:`reset` starts the next one."""

    def __init__(
        self,
        scaffold: str | AgentScaffold | None = None,
        *,
        tool_format: ToolFormat | None = None,
        budget: ContextBudget | int | None = None,
        token_counter: TokenCounter = approx_tokens,
        workdir: str = "/testbed",
        name: str = "swe_agent",
        use_fn_calling: bool | None = None,
        format_model_response: bool = False,
        prompts: Literal["patchgym", "rllm"] = "patchgym",
    ) -> None:
        if scaffold is None:  # the configured default: EnvConfig.scaffold
            scaffold = str(default_of("scaffold"))
        self.scaffold = (
            scaffold if isinstance(scaffold, AgentScaffold) else agent_scaffold(scaffold)
        )
        if use_fn_calling is not None:
            wanted: ToolFormat = "native" if use_fn_calling else "text"
            if tool_format is not None and tool_format != wanted:
                raise ValueError(
                    f"use_fn_calling={use_fn_calling} conflicts with tool_format={tool_format!r}; "
                    "set one of them"
                )
            tool_format = wanted
        self.tool_format: ToolFormat = tool_format or self.scaffold.default_format
        if prompts not in ("patchgym", "rllm"):
            raise ValueError(f"prompts={prompts!r} — allowed: 'patchgym', 'rllm'")
        if prompts == "rllm" and self.scaffold.name not in ("r2egym", "sweagent"):
            raise ValueError(
                f"prompts='rllm' exists for the r2egym and sweagent scaffolds, not {self.scaffold.name!r}"
            )
        self.prompts = prompts
        self.format_model_response = format_model_response
        self.budget = (
            budget if isinstance(budget, ContextBudget) else ContextBudget(max_tokens=budget)
        )
        self.workdir = workdir
        self.name = name
        self._tool_names = self.scaffold.tool_names()
        self._schemas = self.scaffold.tool_schemas()
        self._history = History(token_counter)
        self.reset()

    # -- rLLM contract -----------------------------------------------------------------
    def reset(self) -> None:
        self._history.clear()
        self._trajectory = Trajectory(name=self.name)
        self._current_obs: Any = None
        self._pending: Action | None = None
        self._pending_call_id: str | None = None
        self.format_errors = 0
        self.model_steps = 0
        self.max_elided = 0
        self._max_steps: int | None = None

    @property
    def chat_completions(self) -> list[dict[str, Any]]:
        """The messages to send next (old observations elided to fit the budget)."""
        messages = self._history.render(self.budget)
        self.max_elided = max(self.max_elided, self._history.elided)
        return messages

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The whole conversation, nothing elided."""
        return [dict(m) for m in self._history.messages]

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        """JSON tool schemas for native tool calling; None in the text format."""
        return [dict(t) for t in self._schemas] if self.tool_format == "native" else None

    @property
    def trajectory(self) -> Trajectory:
        return self._trajectory

    def get_current_state(self) -> Step | None:
        return self._trajectory.steps[-1] if self._trajectory.steps else None

    def update_from_env(
        self, observation: Any, reward: float, done: bool, info: Mapping[str, Any], **_: Any
    ) -> None:
        info = dict(info or {})
        if not self._history.messages:
            self._start(observation, info)
            return
        text = self._observation_text(observation)
        if self.prompts == "rllm":
            self._max_steps = info.get("max_steps") or self._max_steps
            text += steps_note(self._max_steps, self.model_steps, info.get("cur_tokens"))
        step = self.get_current_state()
        if step is not None:
            step.next_observation = text
            step.reward = float(reward)
            step.done = bool(done)
            step.info.update(info)
        if self._pending_call_id is not None:
            msg = {"role": "tool", "tool_call_id": self._pending_call_id, "content": text}
        else:
            msg = {"role": "user", "content": text}
        self._history.add(msg, observation=True)
        self._current_obs = text
        self._pending, self._pending_call_id = None, None
        if done:
            self._trajectory.reward = float(reward)
            self._trajectory.info.update(self.stats(), **info)

    def update_from_model(
        self, response: str | ModelReply | Mapping[str, Any], **kw: Any
    ) -> Action:
        reply = _as_reply(response, kw.get("tool_calls"))
        messages = self.chat_completions
        parsed = self._parse(reply)
        self.model_steps += 1
        action = self._action(parsed)
        content = reply.content
        if self.format_model_response:
            call = "" if action.malformed or parsed.call is None else render_call(parsed.call)
            content = f"{parsed.thought}\n\n{call}"
        assistant: dict[str, Any] = {"role": "assistant", "content": content}
        if parsed.call is not None and not action.malformed and reply.tool_calls:
            call_id = parsed.call.id or f"call_{self.model_steps}"
            self._pending_call_id = call_id
            first = dict(reply.tool_calls[0])
            assistant["tool_calls"] = [{**first, "id": call_id, "type": "function"}]
        self._history.add(assistant)
        self._pending = action
        thought = "\n\n".join(t for t in (reply.reasoning, parsed.thought) if t)
        self._trajectory.steps.append(
            Step(
                chat_completions=[*messages, assistant],
                observation=self._current_obs,
                thought=thought,
                action=action.action.model_dump() if not isinstance(action.action, str) else "",
                model_response=reply.content,
                info={
                    "format_error": parsed.error,
                    "extra_calls": parsed.extra_calls,
                    "parse_notes": parsed.notes,
                    "prompt_tokens": reply.usage.prompt_tokens,
                    "completion_tokens": reply.usage.completion_tokens,
                    "elided_observations": self._history.elided,
                },
            )
        )
        return action

    # -- helpers -------------------------------------------------------------------------
    def _parse(self, reply: ModelReply) -> ParseResult:
        """The reply's tool call (subclasses read other action formats)."""
        if self.tool_format == "native" or reply.tool_calls:
            return parse_tool_calls(reply.tool_calls, reply.content, self._tool_names)
        return parse_text(reply.content, self._tool_names)

    def stats(self) -> dict[str, Any]:
        return {
            "model_steps": self.model_steps,
            "format_errors": self.format_errors,
            "format_error_rate": self.format_errors / self.model_steps if self.model_steps else 0.0,
            "max_elided_observations": self.max_elided,
        }

    def _start(self, observation: Any, info: Mapping[str, Any]) -> None:
        problem = observation
        if isinstance(observation, Mapping):
            problem = observation.get("problem_statement") or observation.get("task") or ""
        workdir = str(info.get("workdir") or self.workdir)
        if self.prompts == "rllm":
            system, user = rllm_templates(self.scaffold.name, self.tool_format == "native")
            self._max_steps = info.get("max_steps")
            first = user.format(problem_statement=str(problem))
            first += steps_note(self._max_steps, self.model_steps, info.get("cur_tokens"))
        else:
            system = self.scaffold.system_prompt(self.tool_format, workdir)
            first = self.scaffold.task_prompt(str(problem), workdir)
        self._history.add({"role": "system", "content": system})
        self._history.add({"role": "user", "content": first})
        self._current_obs = str(problem)
        self._trajectory.task = info.get("task_id") or str(problem)[:200]

    def _action(self, parsed: ParseResult) -> Action:
        if parsed.ok and parsed.call is not None:
            return Action(action=parsed.call, extra_calls=parsed.extra_calls)
        self.format_errors += 1
        return Action(action="", format_error=parsed.error or "unreadable reply")

    def _observation_text(self, observation: Any) -> str:
        action = self._pending
        text = observation if isinstance(observation, str) else str(observation)
        if action is not None and action.malformed:
            hint = "" if self.tool_format == "native" else f"\n{FORMAT_HINT}"
            return f"ERROR: {action.format_error}{hint}"
        if action is not None and action.extra_calls:
            text += (
                f"\n[note: your reply had {action.extra_calls + 1} tool calls; only the first "
                "ran. Call one tool per reply.]"
            )
        return text


def render_call(call: Any) -> str:
    """A tool call as canonical ``<function=...>`` text (rLLM's ``format_model_response``)."""
    params = "".join(
        f"<parameter={k}>{v}</parameter>\n" for k, v in dict(call.arguments or {}).items()
    )
    return f"<function={call.name}>\n{params}</function>"


def _as_reply(response: str | ModelReply | Mapping[str, Any], tool_calls: Any) -> ModelReply:
    if isinstance(response, ModelReply):
        return response
    if isinstance(response, str):
        return ModelReply(content=response, tool_calls=list(tool_calls or []))
    return ModelReply.model_validate(dict(response))
