"""Start and stop the llama.cpp servers of the `servers` suite; where models are served."""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

if TYPE_CHECKING:  # gguf and numpy load only when the suite runs
    from tests.servers.tiny_model import TinyModel

LLAMA_CPP_PYTHON = "llama-cpp-python"
LLAMA_SERVER = "llama-server"
SERVER_KINDS = (LLAMA_CPP_PYTHON, LLAMA_SERVER)
CONTEXT_SIZE = 2048
START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Endpoint:
    """Where one tiny model is served: what a provider adapter is pointed at."""

    server: str  # LLAMA_CPP_PYTHON or LLAMA_SERVER
    base_url: str  # http://127.0.0.1:PORT/v1
    model: TinyModel

    @property
    def chat_url(self) -> str:
        """Return the chat completions URL."""
        return f"{self.base_url}/chat/completions"


@dataclass
class RunningServer:
    """One started server process."""

    process: subprocess.Popen[bytes]
    base_url: str
    log: Path
    started_in_s: float


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start(command: list[str], base_url: str, health_url: str, log: Path) -> RunningServer:
    """Start ``command``, wait until ``health_url`` answers 200, return the server."""
    started = time.monotonic()
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    deadline = started + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            if httpx.get(health_url, timeout=1.0).status_code == 200:
                return RunningServer(process, base_url, log, time.monotonic() - started)
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    stop(process)
    tail = log.read_text(errors="replace")[-3000:]
    raise RuntimeError(f"{command[0]} did not become healthy; log tail:\n{tail}")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


class Endpoints:
    """Both servers behind one lookup; each server starts on first use."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._request = request

    def get(self, server: str, model_name: str) -> Endpoint:
        """Return the endpoint serving ``model_name`` on ``server``."""
        from tests.servers.tiny_model import MODELS

        model = next(m for m in MODELS if m.name == model_name)
        if server == LLAMA_CPP_PYTHON:
            running: RunningServer = self._request.getfixturevalue("llama_cpp_python")
            return Endpoint(server, running.base_url, model)
        if server == LLAMA_SERVER:
            by_model: dict[str, RunningServer] = self._request.getfixturevalue("llama_server")
            return Endpoint(server, by_model[model_name].base_url, model)
        raise ValueError(f"unknown server {server!r}")
