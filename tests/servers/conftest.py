"""Fixtures of the `servers` suite: tiny models and the two llama.cpp servers.

The suite runs only when asked for (``pytest -m servers tests/servers``, as
``make test-servers`` does, or ``TOOLLOOP_SERVERS=1``); otherwise this folder
is not collected at all, so the main suite neither needs the builds nor fails
without them. The servers come from ``python -m tests.servers.build``.

Fixtures (all servers bind 127.0.0.1 on a free port and stop at session end):

* ``tiny_models``: the generated GGUF files, by model name;
* ``llama_cpp_python``: one llama-cpp-python server serving every tiny model
  (the request's ``model`` picks it, the server swaps models on demand);
* ``llama_server``: llama.cpp's ``llama-server``, one process per tiny model;
* ``endpoints``: the two above behind one lookup, ``endpoints.get(server,
  model_name)`` returns an ``Endpoint``;
* ``server_kind``: parametrized over both servers, for tests that run on each.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import opt_in
from tests.servers import build
from tests.servers.harness import (
    CONTEXT_SIZE,
    SERVER_KINDS,
    Endpoints,
    RunningServer,
    free_port,
    start,
    stop,
)

HERE = Path(__file__).parent


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Skip this folder unless the `servers` suite was asked for."""
    return opt_in.ignore_unless_asked(collection_path, config, "servers", "TOOLLOOP_SERVERS")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of this folder `servers`."""
    opt_in.mark_folder(items, HERE, "servers")


def _require(ready: bool, what: str) -> None:
    if not ready:
        pytest.fail(
            f"{what} is not built; run `python -m tests.servers.build` "
            "(`make test-servers` does) first",
            pytrace=False,
        )


_START_TIMES: dict[str, float] = {}


def _report(config: pytest.Config, what: str, seconds: float) -> None:
    del config
    _START_TIMES[what] = seconds


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Report the recorded build times and this session's server start times."""
    if not _START_TIMES:
        return
    terminalreporter.section("llama.cpp servers")
    times = build.cache_dir() / "build-times.json"
    if times.is_file():
        for step, seconds in json.loads(times.read_text()).items():
            terminalreporter.write_line(f"build (cached): {step}: {seconds:.0f}s")
    for what, seconds in _START_TIMES.items():
        terminalreporter.write_line(f"start: {what}: {seconds:.2f}s")


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Generate every tiny model into a temporary folder; map names to paths."""
    from tests.servers.tiny_model import write_all

    return write_all(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
def llama_cpp_python(
    tiny_models: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    pytestconfig: pytest.Config,
) -> Iterator[RunningServer]:
    """Run llama-cpp-python's server with every tiny model, for the session."""
    _require(build.python_server_ready(), "llama-cpp-python's server")
    folder = tmp_path_factory.mktemp("llama-cpp-python")
    port = free_port()
    settings = {
        "host": "127.0.0.1",
        "port": port,
        "models": [
            {
                "model": str(path),
                "model_alias": name,
                "n_ctx": CONTEXT_SIZE,
                "n_threads": 2,
                "verbose": False,
            }
            for name, path in tiny_models.items()
        ],
    }
    config_file = folder / "config.json"
    config_file.write_text(json.dumps(settings, indent=2))
    command = [
        str(build.python_server_python()),
        "-m",
        "llama_cpp.server",
        "--config_file",
        str(config_file),
    ]
    base_url = f"http://127.0.0.1:{port}/v1"
    server = start(command, base_url, f"{base_url}/models", folder / "server.log")
    _report(pytestconfig, "llama-cpp-python", server.started_in_s)
    yield server
    stop(server.process)


@pytest.fixture(scope="session")
def llama_server(
    tiny_models: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    pytestconfig: pytest.Config,
) -> Iterator[dict[str, RunningServer]]:
    """Run one llama.cpp ``llama-server`` per tiny model, for the session."""
    _require(build.cpp_server_ready(), "llama.cpp's llama-server")
    folder = tmp_path_factory.mktemp("llama-server")
    servers: dict[str, RunningServer] = {}
    try:
        for name, path in tiny_models.items():
            port = free_port()
            command = [
                str(build.llama_server_binary()),
                "--model",
                str(path),
                "--alias",
                name,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--ctx-size",
                str(CONTEXT_SIZE),
                "--parallel",
                "1",
                "--threads",
                "2",
                "--no-webui",
            ]
            root = f"http://127.0.0.1:{port}"
            servers[name] = start(command, f"{root}/v1", f"{root}/health", folder / f"{name}.log")
            _report(pytestconfig, f"llama-server {name}", servers[name].started_in_s)
        yield servers
    finally:
        for server in servers.values():
            stop(server.process)


@pytest.fixture
def endpoints(request: pytest.FixtureRequest) -> Endpoints:
    """Look up where a tiny model is served, starting its server on first use."""
    return Endpoints(request)


@pytest.fixture(params=SERVER_KINDS)
def server_kind(request: pytest.FixtureRequest) -> str:
    """Run the test once against each server."""
    kind: str = request.param
    return kind
