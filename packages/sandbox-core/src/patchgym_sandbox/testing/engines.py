"""Skipping when an engine is absent — except in CI, where absence is a failure."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

REQUIRE_VAR = "PATCHGYM_REQUIRE_ENGINES"


def engine_missing(reason: str) -> NoReturn:
    """Skip with ``reason``, or fail when ``PATCHGYM_REQUIRE_ENGINES=1`` (set by .ci/run).

    A skipped backend test proves nothing; CI starts every engine that can run here, so
    there a missing engine is a broken setup, not a reason to go green.
    """
    if os.environ.get(REQUIRE_VAR, "") not in ("", "0"):
        pytest.fail(
            f"{reason} ({REQUIRE_VAR} is set, so this is an error, not a skip)", pytrace=False
        )
    pytest.skip(reason)
