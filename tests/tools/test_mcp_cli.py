"""`toolloop mcp list|call -- COMMAND ARGS...` on `mcp-server-time`, and its one-line errors."""

from __future__ import annotations

import json

import pytest

from tests.mcp.conftest import TIME_SERVER
from tests.test_public_api import run_python
from toolloop.tools.cli import main

TIME = TIME_SERVER.command


class TestList:
    def test_it_prints_each_tool_with_its_description_and_schema(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["mcp", "list", "--", TIME]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0:2] == ["get_current_time", "  Get current time in a specific timezone"]
        schema = json.loads(lines[2])
        assert (schema["type"], schema["required"]) == ("object", ["timezone"])
        assert lines[3] == "convert_time"

    def test_a_command_that_does_not_start_is_one_line(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["mcp", "list", "--", "no-such-mcp-server", "--flag"]) == 1
        assert capsys.readouterr().err == (
            'toolloop mcp list: cannot start "no-such-mcp-server --flag": '
            "[Errno 2] No such file or directory: 'no-such-mcp-server'\n"
        )

    def test_a_command_that_does_not_speak_mcp_is_one_line(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["mcp", "list", "--", "true"]) == 1
        assert capsys.readouterr().err == (
            'toolloop mcp list: MCP server "true" (true) closed the connection during the MCP '
            "handshake: is it an MCP server?\n"
        )

    def test_without_a_command_it_says_so(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["mcp", "list", "--"]) == 2
        assert capsys.readouterr().err == "toolloop mcp list: name the server's command after --\n"


class TestCall:
    def test_it_runs_the_tool_through_the_registry_and_prints_the_result(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        status = main(["mcp", "call", "--", TIME, "get_current_time", '{"timezone": "Etc/UTC"}'])
        printed = json.loads(capsys.readouterr().out)
        assert status == 0
        assert (printed["success"], printed["error"]) == (True, None)
        assert printed["data"]["timezone"] == "Etc/UTC"

    def test_a_failed_call_prints_the_error_with_status_1(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The registry's schema gate answers before the server: the failure names the rule."""
        assert main(["mcp", "call", "--", TIME, "get_current_time", "{}"]) == 1
        assert json.loads(capsys.readouterr().out) == {
            "success": False,
            "data": None,
            "error": 'invalid arguments for tool "get_current_time": '
            "$.timezone: is required (rule: required)",
        }

    def test_arguments_that_are_not_json_are_status_2(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["mcp", "call", "--", TIME, "get_current_time", "{nope"]) == 2
        assert capsys.readouterr().err.startswith(
            "toolloop mcp call: the arguments are not JSON: Expecting property name"
        )

    def test_arguments_that_are_not_an_object_are_status_2(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["mcp", "call", "--", TIME, "get_current_time", "[1]"]) == 2
        assert capsys.readouterr().err == (
            "toolloop mcp call: the arguments must be a JSON object, got list\n"
        )


def test_without_the_mcp_extra_the_command_names_it() -> None:
    """`toolloop mcp` without the `mcp` package says to install `toolloop-engine[mcp]`, status 2."""
    done = run_python(
        "import sys; sys.modules['mcp'] = sys.modules['httpx2'] = None\n"
        "from toolloop.tools import main\n"
        "sys.argv = ['toolloop', 'mcp', 'list', '--', 'x']; sys.exit(main())"
    )
    assert done.returncode == 2
    assert done.stderr.endswith("pip install 'toolloop-engine[mcp]'\n")
