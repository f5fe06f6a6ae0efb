"""Fixtures of the `mcp_node` suite: the reference server `@modelcontextprotocol/server-everything`.

It is an npm package, so it needs node: `make test-mcp-node` installs it into
`build/mcp-node` (npm's cache in `build/npm-cache`) and runs this folder, as
`.ci/run` does. Otherwise (`make test`) this folder is not collected; asked
for without the package (``pytest -m mcp_node``), every test fails, naming
the target, rather than skipping.

``everything`` is parametrized over the two transports: the server as a
subprocess on stdio, and as its own streamable HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import opt_in
from tests.mcp.conftest import ROOT
from toolloop.effects.mcp import HttpServer, McpServer, StdioServer

HERE = Path(__file__).parent
EVERYTHING = ROOT / "build/mcp-node/node_modules/@modelcontextprotocol/server-everything"
"""The package; its `dist/index.js` is the server."""


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Skip this folder unless the `mcp_node` suite was asked for."""
    return opt_in.ignore_unless_asked(collection_path, config, "mcp_node", "TOOLLOOP_MCP_NODE")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of this folder `mcp_node`."""
    opt_in.mark_folder(items, HERE, "mcp_node")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class HttpEverything:
    """server-everything as its own streamable HTTP server on a port of 127.0.0.1."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["node", _script(), "streamableHttp"],
            env={**os.environ, "PORT": str(self.port)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_listening(self.port, self.process)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


@pytest.fixture
def http_everything() -> Iterator[HttpEverything]:
    """The HTTP server, started; stopped after the test."""
    server = HttpEverything()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["stdio", "http"])
def everything(request: pytest.FixtureRequest) -> Iterator[McpServer]:
    """The reference server over stdio (started by the source) or streamable HTTP."""
    if request.param == "stdio":
        yield StdioServer(command="node", args=(_script(), "stdio"))
        return
    server = HttpEverything()
    server.start()
    try:
        yield HttpServer(url=server.url)
    finally:
        server.stop()


def _script() -> str:
    if not EVERYTHING.exists():
        pytest.fail(f"{EVERYTHING} is missing: run `make test-mcp-node`")
    return str(EVERYTHING / "dist/index.js")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    """Until the server accepts connections (a hang guard of 30 s, not a timing check)."""
    for _ in range(600):
        if process.poll() is not None:
            pytest.fail(f"server-everything exited with status {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.05).close()
            return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"server-everything did not listen on port {port} within 30 s")
