"""The one retry policy: jittered exponential backoff that honours Retry-After (tenacity).

Every backend (Docker engine calls, Kubernetes create and exec, the cloud create) and the
model-endpoint policy retry through :class:`Retry`; nobody writes a loop of their own. The
defaults live here once: "full jitter" (uniform in ``[0, min(max_s, base_s * 2**n)]``, so
a herd of rollouts refused together does not come back together), a server's
``Retry-After`` as a floor (capped at ``retry_after_max_s``), an optional overall
deadline that stops before a sleep would pass it, and one log line per retry.

What is worth retrying stays with the caller (``when``): only it knows which of its
failures are transient and which calls are safe to repeat.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

import tenacity
from pydantic import BaseModel, ConfigDict, Field
from tenacity.wait import wait_base

T = TypeVar("T")
log = logging.getLogger("patchgym.retry")


class RetryPolicy(BaseModel):
    """How often and how patiently to retry one call (a config node backends embed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attempts: int = Field(default=4, ge=1)
    """Total tries of one call (1 = no retry)."""
    base_s: float = Field(default=0.5, gt=0)
    """Upper bound of the first jittered delay; doubles per retry."""
    max_s: float = Field(default=30.0, gt=0)
    """Cap on the jittered delay."""
    retry_after_max_s: float = Field(default=300.0, ge=0)
    """Cap on a server's Retry-After (a floor for the delay, never shortened by jitter)."""
    deadline_s: float | None = Field(default=None, gt=0)
    """Give up before a sleep would take the whole call past this many seconds."""


def retry_after_of(exc: BaseException) -> float | None:
    """Seconds a server asked us to wait, from ``exc.retry_after`` or a Retry-After header.

    Looks at ``exc.headers`` (kubernetes ``ApiException``) and ``exc.response.headers``
    (requests, httpx, openai); reads delta-seconds or an HTTP date.
    """
    value = getattr(exc, "retry_after", None)
    if isinstance(value, int | float):
        return max(0.0, float(value))
    headers = getattr(exc, "headers", None)
    if headers is None:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        raw = headers.get("Retry-After") or headers.get("retry-after")
    except (AttributeError, TypeError):
        return None
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(raw))
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _Wait(wait_base):
    def __init__(
        self, policy: RetryPolicy, retry_after: Callable[[BaseException], float | None]
    ) -> None:
        self.policy = policy
        self.retry_after = retry_after

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        p = self.policy
        delay = random.uniform(0.0, min(p.max_s, p.base_s * 2 ** (retry_state.attempt_number - 1)))
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        after = self.retry_after(exc) if exc is not None else None
        if after is not None:
            delay = max(delay, min(after, p.retry_after_max_s))
        return delay


class Retry:
    """One call retried under a :class:`RetryPolicy`; ``attempts`` says how many tries ran.

    Make one per call (it counts). On give-up the last exception is raised unchanged, so
    the caller translates it as it would a single failure, with ``attempts`` for the
    message and ``deadline_hit`` to tell "out of time" from "out of tries".
    """

    def __init__(
        self,
        policy: RetryPolicy,
        *,
        when: Callable[[BaseException], bool],
        what: str,
        retry_after: Callable[[BaseException], float | None] = retry_after_of,
        describe: Callable[[BaseException], str] = lambda e: f"{type(e).__name__}: {e}",
    ) -> None:
        self.policy = policy
        self.attempts = 0
        self.deadline_hit = False
        self._when = when
        self._what = what
        self._describe = describe
        self._wait = _Wait(policy, retry_after)

    def _stop(self, state: tenacity.RetryCallState) -> bool:
        if state.attempt_number >= self.policy.attempts:
            return True
        deadline = self.policy.deadline_s
        if (
            deadline is not None
            and (state.seconds_since_start or 0.0) + (state.upcoming_sleep or 0.0) > deadline
        ):
            self.deadline_hit = True
            return True
        return False

    def _log(self, state: tenacity.RetryCallState) -> None:
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        log.warning(
            "%s failed (%s); retry %d in %.2fs",
            self._what,
            self._describe(exc) if exc is not None else "?",
            state.attempt_number,
            state.upcoming_sleep,
        )

    def _kwargs(self) -> dict[str, Any]:
        return {
            "stop": self._stop,
            "wait": self._wait,
            "retry": tenacity.retry_if_exception(self._when),
            "reraise": True,
        }

    def call(
        self,
        fn: Callable[..., T],
        *args: Any,
        sleep: Callable[[float], None] = time.sleep,
        **kwargs: Any,
    ) -> T:
        """Run ``fn(*args, **kwargs)`` (blocking), retrying what ``when`` accepts."""

        def once() -> T:
            self.attempts += 1
            return fn(*args, **kwargs)

        retrying = tenacity.Retrying(sleep=sleep, before_sleep=self._log, **self._kwargs())
        return retrying(once)

    async def acall(
        self,
        fn: Callable[..., Awaitable[T]],
        *args: Any,
        between: Callable[[], Awaitable[None]] | None = None,
        **kwargs: Any,
    ) -> T:
        """Await ``fn(*args, **kwargs)``, retrying; ``between`` runs after each sleep (pacing)."""

        async def once() -> T:
            if self.attempts and between is not None:
                await between()
            self.attempts += 1
            return await fn(*args, **kwargs)

        retrying = tenacity.AsyncRetrying(before_sleep=self._log, **self._kwargs())
        return cast(T, await retrying(once))
