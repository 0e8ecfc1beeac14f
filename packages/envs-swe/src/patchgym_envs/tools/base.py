"""What a tool is: a spec (JSON schema + text form), and an async ``run`` in a sandbox.

A tool reports problems by raising :class:`ToolError`; the scaffold turns that (and any
other non-infrastructure exception) into an error observation, so nothing a model asks
for can raise into the agent loop. Observations are bounded: head and tail are kept and
the cut is stated.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from patchgym_envs.tools.context import ToolContext

ParamType = Literal["string", "integer", "boolean", "array"]


class ToolError(Exception):
    """A tool could not do what was asked; the message is shown to the model."""


class ToolParam(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    type: ParamType = "string"
    description: str
    required: bool = False
    enum: list[str] | None = None
    items: ParamType | None = None
    """Element type when ``type == "array"``."""

    def json_schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "description": self.description}
        if self.enum:
            out["enum"] = list(self.enum)
        if self.type == "array":
            out["items"] = {"type": self.items or "string"}
        return out


class ToolSpec(BaseModel):
    """Name, description and parameters; renders both the JSON schema and the text form."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    parameters: list[ToolParam] = Field(default_factory=list)

    def json_schema(self) -> dict[str, Any]:
        """OpenAI function-calling schema (``{"type": "function", "function": {...}}``)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": {p.name: p.json_schema() for p in self.parameters},
                    "required": [p.name for p in self.parameters if p.required],
                },
            },
        }

    def text_form(self) -> str:
        """Description for the ``<function=NAME><parameter=KEY>VALUE</parameter></function>`` format."""
        lines = [
            f"---- BEGIN FUNCTION: {self.name} ----",
            f"Description: {self.description}",
            "",
            "Parameters:",
        ]
        if not self.parameters:
            lines.append("  (none)")
        for i, p in enumerate(self.parameters, 1):
            req = "required" if p.required else "optional"
            lines.append(f"  ({i}) {p.name} ({p.type}, {req}): {p.description}")
            if p.enum:
                lines.append(f"      Allowed values: {', '.join(f'`{v}`' for v in p.enum)}")
        lines.append(f"---- END FUNCTION: {self.name} ----")
        return "\n".join(lines)

    def example(self) -> str:
        """A call in the text format, with placeholder values."""
        params = "".join(
            f"<parameter={p.name}>...</parameter>\n" for p in self.parameters if p.required
        )
        return f"<function={self.name}>\n{params}</function>"


class Observation(BaseModel):
    """What a tool call produced, as shown to the model, plus flags for the environment."""

    text: str
    error: bool = False
    submitted: bool = False
    truncated: bool = False
    tool: str | None = None


def bound(text: str, max_chars: int) -> tuple[str, bool]:
    """Keep head and tail of ``text`` within ``max_chars``, with a note of what was cut."""
    if len(text) <= max_chars:
        return text, False
    head = int(max_chars * 0.6)
    tail = max_chars - head
    cut = len(text) - head - tail
    note = f"\n\n[... {cut} characters cut from the middle of this output ...]\n\n"
    return text[:head] + note + text[-tail:], True


class Tool(ABC):
    """One tool; subclasses set ``spec`` and implement ``run``."""

    spec: ClassVar[ToolSpec]
    ends_episode: ClassVar[bool] = False

    @property
    def name(self) -> str:
        return self.spec.name

    @abstractmethod
    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        """Do the work; return the observation text, or raise :class:`ToolError`."""

    # -- argument helpers ----------------------------------------------------------
    @staticmethod
    def arg_str(
        args: dict[str, Any], name: str, *, required: bool = True, default: str | None = None
    ) -> str | None:
        value = args.get(name)
        if value is None:
            if required:
                raise ToolError(f"missing required parameter '{name}'")
            return default
        if not isinstance(value, str):
            value = str(value)
        return value

    @staticmethod
    def arg_int(args: dict[str, Any], name: str, *, required: bool = False) -> int | None:
        value = args.get(name)
        if value is None or value == "":
            if required:
                raise ToolError(f"missing required parameter '{name}'")
            return None
        try:
            return int(str(value).strip())
        except ValueError:
            raise ToolError(f"parameter '{name}' must be an integer, got {value!r}") from None

    @staticmethod
    def arg_range(args: dict[str, Any], name: str) -> tuple[int, int] | None:
        value = args.get(name)
        if value is None or value == "":
            return None
        if isinstance(value, str):
            text = value.strip().strip("[]()")
            parts = [p for p in text.replace(",", " ").split() if p]
        else:
            parts = list(value)
        try:
            nums = [int(str(p)) for p in parts]
        except ValueError:
            raise ToolError(
                f"parameter '{name}' must be two integers like [10, 40], got {value!r}"
            ) from None
        if len(nums) != 2:
            raise ToolError(f"parameter '{name}' must be two integers like [10, 40], got {value!r}")
        return nums[0], nums[1]
