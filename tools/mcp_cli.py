"""`toolloop mcp list|call -- COMMAND ARGS...`: a user's first check that a stdio MCP server works.

`list` prints each tool the server offers (name, description, input schema);
`call ... TOOL JSON` runs one through a `ToolRegistry`, as the loop would (the
schema gate, the result mapping, the bounds), and prints the result as JSON.
A command that does not start or does not speak MCP is a one-line error,
status 1; arguments that are not JSON, status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio

from toolloop.effects.in_memory import MemoryKillSignal
from toolloop.effects.mcp import McpServerError, McpToolSource, StdioServer
from toolloop.effects.ports import ToolInvocation
from toolloop.effects.registry import ToolRegistry
from toolloop.states import FunctionCall, ProviderDescriptor, ToolContext


def run(args: argparse.Namespace) -> int:
    """Run `toolloop mcp list` or `toolloop mcp call` (parsed by `toolloop.tools.cli`)."""
    verb: Any = _list if args.mcp_command == "list" else _call
    status: int = verb(args)
    return status


def _list(args: argparse.Namespace) -> int:
    command = _command(args.server)
    if not command:
        return _usage("list", "name the server's command after --")

    async def show(source: McpToolSource) -> None:
        for tool in source.offered.values():
            print(tool.name)
            if tool.description:
                print(f"  {tool.description}")
            print("  " + json.dumps(tool.input_schema, ensure_ascii=False))

    return _with_server("list", command, args, show)


def _call(args: argparse.Namespace) -> int:
    words = _command(args.server)
    if len(words) < 3:
        return _usage("call", "give the server's command, the tool and its JSON arguments")
    *command, tool, text = words
    try:
        arguments = json.loads(text)
    except json.JSONDecodeError as error:
        return _usage("call", f"the arguments are not JSON: {error}")
    if not isinstance(arguments, dict):
        return _usage(
            "call", f"the arguments must be a JSON object, got {type(arguments).__name__}"
        )
    outcome: list[int] = []

    async def run(source: McpToolSource) -> None:
        result = await _run_tool(source.registry, tool, arguments, args.timeout)
        print(json.dumps(result, ensure_ascii=False, indent=2))
        outcome.append(0 if result["success"] else 1)

    status = _with_server("call", command, args, run)
    return outcome[0] if status == 0 else status


def _with_server(verb: str, command: list[str], args: argparse.Namespace, use: Any) -> int:
    """Start the server, `use` the open source, stop it; a start that fails is one line."""
    server = StdioServer(command=command[0], args=tuple(command[1:]))

    async def main() -> None:
        registry = ToolRegistry()
        async with McpToolSource(
            registry, server, name=command[0], prefix="", connect_timeout=args.connect_timeout
        ) as source:
            await use(source)

    try:
        anyio.run(main)
    except McpServerError as error:
        print(f"toolloop mcp {verb}: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f'toolloop mcp {verb}: cannot start "{server.describe()}": {error}', file=sys.stderr)
        return 1
    return 0


async def _run_tool(
    registry: ToolRegistry, tool: str, arguments: dict[str, Any], timeout: float
) -> dict[str, Any]:
    """The tool's result as the loop would get it, or a failure after `timeout` seconds."""
    invocation = ToolInvocation(killed=MemoryKillSignal(), notify=_print_notice)
    with anyio.move_on_after(timeout):
        result = await registry.execute(
            FunctionCall(name=tool, args=arguments), _CONTEXT, invocation
        )
        return {"success": result.success, "data": result.data, "error": result.error}
    return {"success": False, "data": None, "error": f"timed out after {timeout:g} s"}


async def _print_notice(text: str) -> None:
    print(f"[progress] {text}", file=sys.stderr)


def _command(words: list[str]) -> list[str]:
    return words[1:] if words[:1] == ["--"] else words


def _usage(verb: str, message: str) -> int:
    print(f"toolloop mcp {verb}: {message}", file=sys.stderr)
    return 2


_CONTEXT = ToolContext(
    channel_id="cli",
    user_id="cli",
    guild_id=None,
    locale="en",
    provider=ProviderDescriptor(name="cli"),
    persona_name="toolloop",
    user_impersonation=False,
    iteration=0,
    suppress_progress_notices=False,
    show_kill_hint=False,
)
"""A call made by hand: no turn, no provider, nothing gated."""
