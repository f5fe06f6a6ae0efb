"""Fixtures of the `browser` suite: headless Chromium (Debian's) driven by Playwright.

The suite runs only when asked for (``pytest -m browser tests/browser``, as
``make test-browser`` does after installing Chromium, or ``TOOLLOOP_BROWSER=1``);
otherwise this folder is not collected. Playwright's own browser download is not
used: it drives the system's ``chromium`` (or ``$CHROMIUM``) by its path.
Screenshots are kept in ``build/browser/``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Playwright, sync_playwright

from tests import opt_in

HERE = Path(__file__).parent
ARTEFACTS = HERE.parent.parent / "build" / "browser"
URL = re.compile(r"toolloop inspect: (http://\S+)")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Skip this folder unless the `browser` suite was asked for."""
    return opt_in.ignore_unless_asked(collection_path, config, "browser", "TOOLLOOP_BROWSER")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of this folder `browser`."""
    opt_in.mark_folder(items, HERE, "browser")


@pytest.fixture(scope="session")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="session")
def browser(playwright: Playwright) -> Iterator[Browser]:
    executable = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if executable is None:
        pytest.fail("no chromium on PATH: `make test-browser` installs Debian's")
    launched = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
    yield launched
    launched.close()


@pytest.fixture(scope="session")
def artefacts() -> Path:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    return ARTEFACTS


class Demo:
    """`toolloop inspect --demo` running in its own process; `url` is what it printed."""

    def __init__(self, *options: str) -> None:
        command = Path(sys.executable).parent / "toolloop"
        self.process = subprocess.Popen(
            [command, "inspect", "--demo", "--port", "0", *options],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        found = URL.search(line)
        if found is None:
            self.stop()
            raise AssertionError(f"toolloop inspect printed {line!r}, not its URL")
        self.url = found.group(1)
        self.base = self.url.split("?")[0]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture
def demo() -> Iterator[Demo]:
    running = Demo("--turns", "3")
    yield running
    running.stop()


@pytest.fixture
def guarded_demo() -> Iterator[Demo]:
    running = Demo("--turns", "1", "--host", "0.0.0.0", "--token", "browser-t0ken")
    yield running
    running.stop()
