"""Fixtures of the `temporal` suite: one dev server per session, a worker per test.

The suite runs only when asked for (``make test-temporal``, that is
``python -m tests.temporal.run``, or ``TOOLLOOP_TEMPORAL=1``); otherwise this
folder is not collected and ``make test`` stays fast. Temporal's SDK runs on
asyncio only, so these tests do not run under trio.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import opt_in
from tests.temporal.server import DevServer

HERE = Path(__file__).parent


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Skip this folder unless the `temporal` suite was asked for."""
    return opt_in.ignore_unless_asked(collection_path, config, "temporal", "TOOLLOOP_TEMPORAL")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of this folder `temporal`."""
    opt_in.mark_folder(items, HERE, "temporal")


@pytest.fixture(scope="session")
def temporal() -> Iterator[str]:
    """The dev server's address (`127.0.0.1:PORT`), one server for the session."""
    with DevServer() as server:
        yield server.target


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
