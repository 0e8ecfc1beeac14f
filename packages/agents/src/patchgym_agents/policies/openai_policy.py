"""``OpenAIPolicy``: any OpenAI-compatible chat endpoint through the official client.

vLLM, SGLang, llama.cpp's server and hosted APIs all speak ``/v1/chat/completions``.
The client's own retries are off; this policy retries 429, 5xx, timeouts and connection
errors itself under sandbox-core's shared :class:`~patchgym_sandbox.retry.RetryPolicy`
(full-jitter exponential backoff, ``Retry-After`` honoured), so the schedule is known and
logged. Other 4xx (a prompt over the context length, a bad parameter) are not
retried: :class:`PolicyError` with the server's message, or
:class:`ContextLengthExceeded` when the prompt no longer fits the context window. Retries exhausted:
:class:`PolicyUnavailable` (the runner counts the episode as infra-failed).

The ``openai`` client is imported when a policy is made, not with this module: its
import costs about half a second, which every ``patchgym`` command would pay through
``import patchgym_agents`` (the trainer's schema reads :mod:`patchgym_agents.defaults`).
"""

from __future__ import annotations

import logging
import re
import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from patchgym_agents.defaults import MODEL_RETRIES, MODEL_TIMEOUT_S, TEMPERATURE
from patchgym_agents.policies.base import (
    ContextLengthExceeded,
    EpisodeContext,
    Policy,
    PolicyError,
    PolicyUnavailable,
)
from patchgym_agents.types import ModelReply, Usage
from patchgym_sandbox.retry import Retry, RetryPolicy

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

_CONTEXT = re.compile(
    r"context length|context window|maximum context|too many tokens|prompt is too long|"
    r"input is too long|exceeds the (?:model's )?max",
    re.IGNORECASE,
)


def _transient_errors() -> tuple[type[Exception], ...]:
    import openai

    return (
        openai.RateLimitError,
        openai.InternalServerError,
        openai.APITimeoutError,
        openai.APIConnectionError,
    )


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, _transient_errors())


class Sampling(BaseModel):
    model_config = ConfigDict(extra="forbid")

    temperature: float | None = TEMPERATURE
    """None: the server's default."""
    top_p: float | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    stop: list[str] | None = None
    seed: int | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Server-specific fields (vLLM's ``top_k``, ``repetition_penalty``, ...)."""


class OpenAIPolicy(Policy):
    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        sampling: Sampling | dict[str, Any] | None = None,
        model_timeout_s: float | None = None,
        max_retries: int = MODEL_RETRIES,
        backoff_s: float = 1.0,
        backoff_max_s: float = 60.0,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        import openai

        self.model = model
        self.sampling = (
            sampling if isinstance(sampling, Sampling) else Sampling.model_validate(sampling or {})
        )
        self.retry = RetryPolicy(
            attempts=max_retries + 1,
            base_s=backoff_s,
            max_s=backoff_max_s,
            retry_after_max_s=backoff_max_s,
        )
        self._client = client or openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or "EMPTY",
            timeout=MODEL_TIMEOUT_S if model_timeout_s is None else model_timeout_s,
            max_retries=0,
        )

    async def generate(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None,
        episode: EpisodeContext,
    ) -> ModelReply:
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages}
        for key in ("temperature", "top_p", "max_tokens", "stop", "seed"):
            value = getattr(self.sampling, key)
            if value is not None:
                kwargs[key] = value
        if self.sampling.extra_body:
            kwargs["extra_body"] = self.sampling.extra_body
        if tools:
            kwargs["tools"] = tools
            kwargs["tool_choice"] = "auto"
        import openai

        transient = _transient_errors()
        start = time.monotonic()
        retry = Retry(self.retry, when=_transient, what=f"model call to {self.model}")
        try:
            resp = await retry.acall(self._client.chat.completions.create, **kwargs)
        except transient as exc:
            raise PolicyUnavailable(
                f"{self.model} at {self._client.base_url}: {type(exc).__name__} after "
                f"{retry.attempts} attempts: {exc}"
            ) from exc
        except openai.APIStatusError as exc:
            if exc.status_code in (400, 413) and _CONTEXT.search(str(exc.message)):
                raise ContextLengthExceeded(
                    f"{self.model}: the conversation exceeds the context window: {exc.message}"
                ) from exc
            raise PolicyError(
                f"{self.model} at {self._client.base_url} refused the request "
                f"({exc.status_code}): {exc.message}"
            ) from exc
        if not resp.choices:
            raise PolicyError(f"{self.model} returned no choices")
        choice = resp.choices[0]
        msg = choice.message
        calls = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": fn.name, "arguments": fn.arguments},
            }
            for c in (msg.tool_calls or [])
            if (fn := getattr(c, "function", None)) is not None
        ]
        reasoning = getattr(msg, "reasoning_content", None) or getattr(msg, "reasoning", None)
        usage = Usage(
            prompt_tokens=resp.usage.prompt_tokens if resp.usage else 0,
            completion_tokens=resp.usage.completion_tokens if resp.usage else 0,
        )
        return ModelReply(
            content=msg.content or "",
            tool_calls=calls,
            reasoning=reasoning if isinstance(reasoning, str) else "",
            usage=usage,
            finish_reason=choice.finish_reason,
            latency_s=time.monotonic() - start,
        )

    async def aclose(self) -> None:
        await self._client.close()
