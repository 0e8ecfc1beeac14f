"""Create a pod, retrying what the API says is transient (409/429/500/503) with backoff."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException

from patchgym_k8s.client import Api
from patchgym_k8s.errors import ApiFailure, from_api_exception, status_message
from patchgym_k8s.metadata import CREATE_NONCE_ANNOTATION
from patchgym_sandbox.errors import RateLimited
from patchgym_sandbox.retry import Retry, RetryPolicy, retry_after_of

RETRY_STATUSES = frozenset({409, 429, 500, 503})


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, ApiException) and int(exc.status or 0) in RETRY_STATUSES


def create_pod(
    api: Api,
    body: dict[str, Any],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """POST the pod; on 409/429/500/503 retry under ``policy`` (Retry-After honoured).

    A 409 AlreadyExists for a pod carrying our create nonce means an earlier attempt
    reached the server after all: that pod is adopted instead of failing.
    """
    name = body["metadata"]["name"]
    nonce = body["metadata"]["annotations"][CREATE_NONCE_ANNOTATION]

    def once() -> dict[str, Any]:
        try:
            return api.create_pod(body)
        except ApiException as exc:
            if int(exc.status or 0) == 409 and "AlreadyExists" in str(exc.body or ""):
                existing = api.read_pod(name)
                ann = ((existing or {}).get("metadata") or {}).get("annotations") or {}
                if existing is not None and ann.get(CREATE_NONCE_ANNOTATION) == nonce:
                    return existing
            raise

    retry = Retry(policy, when=_transient, what=f"create pod {name}")
    try:
        return retry.call(once, sleep=sleep)
    except ApiException as exc:
        status = int(exc.status or 0)
        if status not in RETRY_STATUSES:
            raise from_api_exception(exc, f"create pod {name}") from exc
        message = (
            f"create pod {name}: gave up after {retry.attempts} attempts, "
            f"last HTTP {status}: {status_message(exc.body)}"
        )
        if status == 429:
            raise RateLimited(message, retry_after=retry_after_of(exc)) from exc
        raise ApiFailure(message, status=status) from exc
