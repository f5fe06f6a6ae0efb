"""`toolloop demo` end to end, in a subprocess: the embedded model, a loopback endpoint, plain
and terminal output; and the loopback model server it is served by."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.openai_server import OpenAIServer, text_reply, tool_call_reply
from toolloop.effects.turn import NUDGE
from toolloop.testing.model_server import ModelServer

TOOLLOOP = Path(sys.executable).with_name("toolloop")
SUMMARY = re.compile(r"^summary: (\d+) provider calls?, (\d+) tools? run, \d+\.\d\d s$", re.M)
QUESTION = "What is 17 * 23 + 4, and what time is it in Tokyo?"


def run_demo(*options: str, key: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """`toolloop demo OPTIONS` with stdout a pipe; OPENAI_API_KEY is `key` (absent: unset)."""
    environment = {
        k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "FORCE_COLOR")
    }
    environment.update(env, COLUMNS="200")
    if key is not None:
        environment["OPENAI_API_KEY"] = key
    return subprocess.run(
        [str(TOOLLOOP), "demo", *options],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
        check=False,
    )


def summary(output: str) -> tuple[int, int]:
    """(provider calls, tools run) from the summary line."""
    found = SUMMARY.search(output)
    assert found is not None, output
    return int(found[1]), int(found[2])


@pytest.fixture(scope="module")
def embedded() -> subprocess.CompletedProcess[str]:
    """One run of the demo against its embedded model, piped (shared: it takes seconds)."""
    return run_demo()


@pytest.fixture
def endpoint() -> Iterator[OpenAIServer]:
    """A scripted loopback endpoint for `--base-url`."""
    with OpenAIServer() as server:
        yield server


class TestEmbeddedModel:
    def test_the_demo_answers_with_the_real_tool_results(
        self, embedded: subprocess.CompletedProcess[str]
    ) -> None:
        """The embedded model calls both tools and its answer carries calculate's 395."""
        assert embedded.returncode == 0, embedded.stderr
        answer = next(line for line in embedded.stdout.splitlines() if "is now" in line)
        assert "395" in answer
        assert summary(embedded.stdout) == (3, 2)

    def test_the_demo_shows_each_tool_call_its_result_and_the_turn(
        self, embedded: subprocess.CompletedProcess[str]
    ) -> None:
        """Both calls appear with their arguments and results, then the turn's status."""
        lines = embedded.stdout.splitlines()
        assert '⚙ calculate {"expression": "17 * 23 + 4"}' in lines
        assert '  ↳ {"expression": "17 * 23 + 4", "value": 395}' in lines
        assert '⚙ get_time {"timezone": "Asia/Tokyo"}' in lines
        assert "turn: completed" in lines
        assert any(line.startswith("persona response (Tomo): 17 × 23 + 4 is 395") for line in lines)

    def test_piped_output_is_plain_text(self, embedded: subprocess.CompletedProcess[str]) -> None:
        """With stdout not a terminal there are no escape codes and no live region."""
        assert "\x1b" not in embedded.stdout
        assert embedded.stdout.count("summary:") == 1

    def test_terminal_rendering_runs_to_the_same_end(self) -> None:
        """Forced terminal output (live status, colour) completes with the same summary."""
        done = run_demo(FORCE_COLOR="1")
        assert done.returncode == 0, done.stderr
        assert "\x1b[" in done.stdout
        assert summary(re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", done.stdout)) == (3, 2)


class TestBaseUrl:
    def test_the_demo_runs_against_an_endpoint_with_the_key_from_the_environment(
        self, endpoint: OpenAIServer
    ) -> None:
        """--base-url and --model reach the endpoint; OPENAI_API_KEY is the bearer token."""
        endpoint.script(
            tool_call_reply("calculate", {"expression": "17 * 23 + 4"}), text_reply("It is 395.")
        )
        done = run_demo("--base-url", endpoint.base_url, "--model", "gpt-test", key="sk-test")
        assert done.returncode == 0, done.stderr
        assert "Tomo: It is 395." in done.stdout
        assert summary(done.stdout) == (2, 1)
        request = endpoint.requests[0]
        assert (request.body["model"], request.headers["Authorization"]) == (
            "gpt-test",
            "Bearer sk-test",
        )
        assert request.body["messages"][-1]["content"] == f"you: {QUESTION}"

    def test_without_a_key_the_endpoint_is_called_without_auth(
        self, endpoint: OpenAIServer
    ) -> None:
        """Local servers need no key: no Authorization header is sent."""
        endpoint.script(text_reply("Hello."))
        done = run_demo("--base-url", endpoint.base_url, "--model", "local")
        assert done.returncode == 0, done.stderr
        assert "Authorization" not in endpoint.requests[0].headers

    def test_verbatim_nudges_the_endpoint_and_recovers_the_call_from_text(
        self, endpoint: OpenAIServer
    ) -> None:
        """--verbatim: the request carries the nudge and a call written as text runs."""
        endpoint.script(
            text_reply('`calculate({"expression": "17 * 23 + 4"})`'), text_reply("It is 395.")
        )
        done = run_demo("--base-url", endpoint.base_url, "--model", "local", "--verbatim")
        assert done.returncode == 0, done.stderr
        assert any(NUDGE in m["content"] for m in endpoint.requests[0].body["messages"])
        assert '  ↳ {"expression": "17 * 23 + 4", "value": 395}' in done.stdout.splitlines()

    def test_an_unreachable_endpoint_ends_the_turn_in_error_without_a_traceback(self) -> None:
        """A refused connection is the turn's `error`, shown with its cause; exit status 1."""
        with socket.socket() as unused:
            unused.bind(("127.0.0.1", 0))
            port = unused.getsockname()[1]
        done = run_demo("--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m")
        assert done.returncode == 1
        assert "turn: error" in done.stdout
        assert summary(done.stdout) == (1, 0)
        assert "error: " in done.stdout
        assert "Traceback" not in done.stderr

    def test_base_url_without_model_is_refused(self) -> None:
        """--base-url needs --model: exit status 2 and a message naming both."""
        done = run_demo("--base-url", "http://127.0.0.1:9/v1")
        assert done.returncode == 2
        assert "--base-url needs --model" in done.stdout


def respond(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A responder echoing the request's model back in two chunks."""
    yield {"choices": [{"index": 0, "delta": {"content": body["model"]}}]}
    yield {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}


class TestModelServer:
    def test_a_request_is_answered_with_the_responders_chunks_then_done(self) -> None:
        """Each yielded chunk is one `data:` event, and the stream ends with `[DONE]`."""
        with ModelServer(respond, delay=0) as server:
            response = httpx.post(f"{server.base_url}/chat/completions", json={"model": "echo"})
        events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
        assert response.headers["content-type"] == "text/event-stream"
        assert [json.loads(e) for e in events[:-1]] == list(respond({"model": "echo"}))
        assert events[-1] == "[DONE]"

    def test_another_path_is_a_404_naming_the_route(self) -> None:
        """Only POST /v1/chat/completions is served."""
        with ModelServer(respond, delay=0) as server:
            response = httpx.post(f"{server.base_url}/completions", json={})
        assert response.status_code == 404
        assert response.json()["error"]["message"] == (
            "no route /v1/completions; POST /v1/chat/completions"
        )

    @pytest.mark.parametrize(
        ("body", "problem"),
        [(b"{not json", "the request body is not JSON"), (b"[1]", "not a JSON object")],
    )
    def test_a_body_that_is_not_a_json_object_is_a_400(self, body: bytes, problem: str) -> None:
        """A malformed request gets OpenAI's error body saying what was wrong."""
        with ModelServer(respond, delay=0) as server:
            response = httpx.post(f"{server.base_url}/chat/completions", content=body)
        assert response.status_code == 400
        assert problem in response.json()["error"]["message"]
