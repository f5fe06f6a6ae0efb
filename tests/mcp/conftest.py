"""Fixtures of the MCP tests: the tests' own hostile server, `mcp-server-time`, calls by hand.

Every server here is a real subprocess speaking MCP over stdio; nothing of
the `mcp` package is mocked.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import anyio
import attrs
import pytest

from toolloop.effects.in_memory import MemoryKillSignal
from toolloop.effects.mcp import StdioServer
from toolloop.effects.ports import ToolInvocation
from toolloop.effects.registry import ToolRegistry
from toolloop.states import FunctionCall, JsonObject, ProviderDescriptor, ToolContext, ToolResult

ROOT = Path(__file__).parents[2]
TIME_SERVER = StdioServer(command=str(Path(sys.executable).parent / "mcp-server-time"))
"""`mcp-server-time` (PyPI), installed beside the test's Python by the `test` extra."""


@attrs.define
class Hostile:
    """`tests.mcp.hostile_server` and the log where it notes what it saw."""

    log: Path

    def server(self, *flags: str) -> StdioServer:
        return StdioServer(
            command=sys.executable,
            args=("-m", "tests.mcp.hostile_server", *flags),
            env={"HOSTILE_LOG": str(self.log)},
            cwd=str(ROOT),
        )

    def once(self) -> StdioServer:
        """The server started through a shell that refuses every start after the first
        (the log exists then): a server that cannot be restarted, failing fast."""
        server = self.server()
        command = " ".join(shlex.quote(word) for word in (server.command, *server.args))
        check = f"test -e {shlex.quote(str(self.log))} && exit 1; exec {command}"
        return attrs.evolve(server, command="sh", args=("-c", check))

    def lines(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []

    async def noted(self, line: str) -> None:
        """Wait until the server noted `line` (a hang guard of 30 s, not a timing assertion)."""
        with anyio.fail_after(30):
            while line not in self.lines():
                await anyio.sleep(0.02)


@pytest.fixture
def hostile(tmp_path: Path) -> Hostile:
    return Hostile(log=tmp_path / "hostile.log")


CONTEXT = ToolContext(
    channel_id="c",
    user_id="u",
    guild_id=None,
    locale="en",
    provider=ProviderDescriptor(name="local"),
    persona_name="Tomo",
    user_impersonation=False,
    iteration=0,
    suppress_progress_notices=False,
    show_kill_hint=False,
)


async def call(
    registry: ToolRegistry, name: str, args: JsonObject, notices: list[str] | None = None
) -> ToolResult:
    """Run one call through the registry as the interpreter does, collecting progress notices."""

    async def notify(text: str) -> None:
        if notices is not None:
            notices.append(text)

    invocation = ToolInvocation(killed=MemoryKillSignal(), notify=notify)
    return await registry.execute(FunctionCall(name=name, args=args), CONTEXT, invocation)


def children() -> set[int]:
    """The live child processes of this one (from /proc)."""
    mine = str(os.getpid())
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if fields[1] == mine and fields[0] != "Z":
                found.add(int(entry))
    return found


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))
