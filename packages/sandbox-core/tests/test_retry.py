"""The shared retry policy: tries, jitter bounds, Retry-After as a floor, deadline, async pacing."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from types import SimpleNamespace

import pytest

from patchgym_sandbox.errors import RateLimited
from patchgym_sandbox.retry import Retry, RetryPolicy, retry_after_of


class Flaky(Exception):
    pass


def failing(n: int, exc: BaseException) -> tuple[list[int], Callable[[], str]]:
    calls: list[int] = []

    def fn() -> str:
        calls.append(1)
        if len(calls) <= n:
            raise exc
        return "ok"

    return calls, fn


def test_retries_until_success_and_counts() -> None:
    slept: list[float] = []
    _, fn = failing(2, Flaky("x"))
    r = Retry(
        RetryPolicy(attempts=4, base_s=1, max_s=8), when=lambda e: isinstance(e, Flaky), what="t"
    )
    assert r.call(fn, sleep=slept.append) == "ok"
    assert r.attempts == 3 and len(slept) == 2
    assert 0 <= slept[0] <= 1 and 0 <= slept[1] <= 2  # full jitter under base * 2**n


def test_gives_up_with_the_last_exception_unchanged() -> None:
    _, fn = failing(10, Flaky("boom"))
    r = Retry(RetryPolicy(attempts=3, base_s=0.01), when=lambda e: True, what="t")
    with pytest.raises(Flaky, match="boom"):
        r.call(fn, sleep=lambda s: None)
    assert r.attempts == 3 and not r.deadline_hit


def test_not_retryable_raises_at_once() -> None:
    _, fn = failing(10, ValueError("no"))
    r = Retry(RetryPolicy(attempts=5), when=lambda e: isinstance(e, Flaky), what="t")
    with pytest.raises(ValueError):
        r.call(fn, sleep=lambda s: None)
    assert r.attempts == 1


def test_retry_after_is_a_floor_and_capped() -> None:
    slept: list[float] = []
    _, fn = failing(2, RateLimited("slow down", retry_after=7.0))
    policy = RetryPolicy(attempts=3, base_s=0.01, max_s=0.02, retry_after_max_s=5.0)
    Retry(policy, when=lambda e: True, what="t").call(fn, sleep=slept.append)
    assert slept == [5.0, 5.0]


def test_retry_after_from_headers_seconds_and_date() -> None:
    assert retry_after_of(SimpleNamespace(headers={"Retry-After": "3"})) == 3.0  # type: ignore[arg-type]
    resp = SimpleNamespace(headers={"retry-after": "2.5"})
    assert retry_after_of(SimpleNamespace(response=resp)) == 2.5  # type: ignore[arg-type]
    date = email.utils.formatdate(time.time() + 60, usegmt=True)
    got = retry_after_of(SimpleNamespace(headers={"Retry-After": date}))  # type: ignore[arg-type]
    assert got is not None and 55 <= got <= 61
    assert retry_after_of(SimpleNamespace(headers={"Retry-After": "soon"})) is None  # type: ignore[arg-type]
    assert retry_after_of(Flaky()) is None


def test_deadline_stops_before_a_sleep_would_pass_it() -> None:
    _, fn = failing(10, RateLimited("x", retry_after=10.0))
    r = Retry(RetryPolicy(attempts=10, deadline_s=5.0), when=lambda e: True, what="t")
    with pytest.raises(RateLimited):
        r.call(fn, sleep=lambda s: None)
    assert r.deadline_hit and r.attempts == 1


async def test_async_paces_between_attempts() -> None:
    paced: list[int] = []
    calls: list[int] = []

    async def fn() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise Flaky()
        return "ok"

    async def pace() -> None:
        paced.append(1)

    r = Retry(RetryPolicy(attempts=3, base_s=0.001, max_s=0.002), when=lambda e: True, what="t")
    assert await r.acall(fn, between=pace) == "ok"
    assert r.attempts == 3 and len(paced) == 2
