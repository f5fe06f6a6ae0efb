"""Suite-wide settings: hypothesis budgets, both anyio backends, the loopback model server."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.openai_server import OpenAIServer

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "mutation",
    deadline=None,
    max_examples=40,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(params=["trio", "asyncio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every `anyio` test runs under trio and under asyncio."""
    return str(request.param)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    """A loopback chat-completions server on a free port, stopped after the test."""
    with OpenAIServer() as running:
        yield running
