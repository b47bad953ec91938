"""Fixtures the tutorial tier's tests share."""

from __future__ import annotations

import pytest
from tutorial_support import toolchain_env


@pytest.fixture(scope="module")
def real_env() -> dict[str, str]:
    """The environment with the real p4lang toolchain on PATH (skips without it)."""
    env = toolchain_env()
    if env is None:
        pytest.skip("no ../shared/toolchains beside the repository: the real toolchain (its "
                    "help text, p4c's outputs) is unavailable")
    return env
