"""An MCP server as a tool source of the registry: its tools registered, run and kept current.

`McpToolSource` is an async context manager. On entry it connects (starting a
stdio server's process), lists the server's tools and registers each with the
registry under `prefix + name`, with the server's `inputSchema` (checked like
every schema) and `requires_follow_up` (true by default: a model must present
what a search or fetch server found, SPEC 7). On exit it unregisters them and
closes the connection, which stops a stdio server. A tool the registry refuses
(a bad schema, a name taken) is left out, logged and kept in `refused`.

While it is open:

* one connection serves every call; `notifications/tools/list_changed` makes
  it list the tools again and register the difference;
* a call ended by the loop (the per-tool timeout, a kill) is cancelled here at
  once, and the `mcp` package sends the server `notifications/cancelled` for
  it; the server then has `stop_grace` seconds to answer a ping, or it is
  taken as stuck: the connection is closed (a stdio server terminated) and a
  fresh one started, so the next call finds a server that listens;
* a server that dies (or is taken as stuck) is restarted after a backoff that
  doubles from `first_backoff`; after `max_restarts` failed starts or deaths in
  a row (a call answered on a connection resets the count) the source gives
  up. A call while no connection is up is a failure that says why, at once;
* MCP progress notifications of a call become the tool's progress notices.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import AsyncIterable, Callable, Collection
from types import TracebackType

import anyio
import attrs
import mcp_types as types
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectSendStream
from mcp import ClientSession, MCPError
from mcp.client.session import IncomingMessage
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.message import SessionMessage

from toolloop.effects.mcp.results import tool_result
from toolloop.effects.mcp.servers import McpServer, open_transport
from toolloop.effects.registry import FollowUpRule, ToolCall, ToolRegistry, ToolSchemaError
from toolloop.states import JsonObject, ProviderDescriptor, ToolResult
from toolloop.states.errors import InvalidOption, ToolloopError

log = logging.getLogger(__name__)

MAX_TOOL_PAGES = 100
"""`tools/list` pages read per listing: a server whose cursor never ends cannot hang a start."""


class McpServerError(ToolloopError, RuntimeError):
    """An MCP server could not be started or did not speak MCP."""

    def __init__(self, server: str, problem: str) -> None:
        super().__init__(f'MCP server "{server}" {problem}')
        self.server = server
        self.problem = problem


@attrs.define(eq=False)
class _Connection:
    """One live session; `ended` is set to close it (it dropped, it is stuck, the source closes)."""

    session: ClientSession
    ended: anyio.Event
    answered: bool = False
    """A call got its answer on it: the server works, so its restarts count from zero again."""


@attrs.define
class _Attempt:
    """One connection's course, as `_connect` reads it after every task group is left."""

    live: _Connection | None = None
    """Set once the transport is open (a stdio server's process started)."""
    started: bool = False
    """The handshake and the first listing are done."""
    failed: McpServerError | None = None


@attrs.define
class _Down:
    """Why no connection is up, as a call's failure says it."""

    reason: str


class McpToolSource:
    """The tools of one MCP server in a `ToolRegistry`, for as long as the source is open."""

    def __init__(
        self,
        registry: ToolRegistry,
        server: McpServer,
        *,
        name: str,
        prefix: str | None = None,
        tools: Collection[str] | None = None,
        requires_follow_up: bool | FollowUpRule = True,
        connect_timeout: float = 30.0,
        stop_grace: float = 2.0,
        max_restarts: int = 5,
        first_backoff: float = 0.5,
    ) -> None:
        """`name` names the server in errors, logs and the follow-up question.

        `prefix` (default `name + "_"`) goes before each tool's name, so two
        servers never collide; `tools` is the allowlist of the server's own
        tool names (None: all). A callable `requires_follow_up` is asked with
        the provider and this source's `name` as the server.
        """
        self.registry = registry
        self.server = server
        self.name = name
        self.prefix = f"{name}_" if prefix is None else prefix
        _check_options(
            self.prefix,
            positive={"connect_timeout": connect_timeout, "stop_grace": stop_grace},
            not_negative={"max_restarts": max_restarts, "first_backoff": first_backoff},
        )
        self.allowed = None if tools is None else frozenset(tools)
        self.connect_timeout = connect_timeout
        self.stop_grace = stop_grace
        self.max_restarts = max_restarts
        self.first_backoff = first_backoff
        self._follow_up = _follow_up_for(name, requires_follow_up)
        self.offered: dict[str, types.Tool] = {}
        """The server's tools that are registered, by registered name."""
        self.refused: dict[str, str] = {}
        """The server's tools the registry refused, by registered name: why."""
        self._live: _Connection | _Down = _Down("is not connected yet")
        self._group: TaskGroup | None = None
        self._listing = anyio.Lock()

    async def __aenter__(self) -> McpToolSource:
        """Connect and register the tools; `McpServerError` (or `OSError`) if that fails."""
        group = anyio.create_task_group()
        await group.__aenter__()
        try:
            await group.start(self._supervise)
        except BaseException:
            group.cancel_scope.cancel()
            await group.__aexit__(None, None, None)
            raise
        self._group = group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Unregister the tools and close the connection (a stdio server is stopped)."""
        group, self._group = self._group, None
        assert group is not None, "the source was not entered"
        for registered in list(self.offered):
            self.registry.unregister(registered)
        self.offered.clear()
        self._live = _Down("is closed")
        group.cancel_scope.cancel()
        await group.__aexit__(None, None, None)

    async def call(self, tool: str, args: JsonObject, call: ToolCall) -> ToolResult:
        """Run the server's `tool` (its own name); every outcome but cancellation is a result."""
        live = self._live
        if isinstance(live, _Connection) and live.ended.is_set():  # not yet seen by `_connect`
            live = _Down("is restarting")
        if isinstance(live, _Down):
            return _failure(f'MCP server "{self.name}" {live.reason}; try again later')
        try:
            answer = await live.session.call_tool(
                tool, args, progress_callback=_progress_notices(call)
            )
        except anyio.get_cancelled_exc_class():
            if self._group is not None:  # the mcp package has sent notifications/cancelled
                self._group.start_soon(self._check_stopped, live)
            raise
        except MCPError as error:
            if error.code == types.CONNECTION_CLOSED:
                live.ended.set()
                return _failure(
                    f'MCP server "{self.name}" closed the connection during the call to "{tool}"; '
                    "it is being restarted"
                )
            return _failure(f'MCP server "{self.name}" refused "{tool}": {error.error.message}')
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as error:
            live.ended.set()
            return _failure(f'MCP server "{self.name}" could not be reached: {error}')
        live.answered = True
        return tool_result(self.name, tool, answer)

    async def _check_stopped(self, live: _Connection) -> None:
        """After a cancelled call: a server that answers no ping within `stop_grace` is ended."""
        with anyio.move_on_after(self.stop_grace):
            with contextlib.suppress(MCPError):  # gone already: the supervisor restarts it
                await live.session.send_ping()
            return
        log.warning(
            'MCP server "%s" did not answer within %s s of a cancelled call; restarting it',
            self.name,
            self.stop_grace,
        )
        live.ended.set()

    async def _supervise(self, *, task_status: TaskStatus[None]) -> None:
        """Connect (the first failure is the caller's), then restart each ended connection."""
        answered = await self._connect(on_ready=task_status.started)
        failures = 0
        while True:
            failures = 0 if answered else failures + 1
            if failures > self.max_restarts:
                self._live = _Down(f"stopped after {self.max_restarts} restarts in a row")
                log.error('MCP server "%s" gave up after %s restarts', self.name, failures - 1)
                return
            delay = self.first_backoff * 2 ** max(failures - 1, 0)
            self._live = _Down(f"is restarting (attempt {failures + 1} of {self.max_restarts + 1})")
            await anyio.sleep(delay)
            try:
                answered = await self._connect(on_ready=lambda: None)
            except (McpServerError, OSError) as error:
                log.warning('MCP server "%s" did not restart: %s', self.name, error)
                answered = False

    async def _connect(self, *, on_ready: Callable[[], object]) -> bool:
        """Run one connection until it ends; whether a call was answered on it.

        A start that fails raises (`OSError` when a command cannot be spawned,
        else `McpServerError`), once every task group is left, so as itself and
        not inside an exception group. What breaks a connection after its start
        (an HTTP server gone: the transport raises) only ends it.
        """
        attempt = _Attempt()
        try:
            await self._run(attempt, on_ready)
        except Exception as error:
            if attempt.live is None and isinstance(error, OSError):
                raise  # the command could not be spawned
            if not attempt.started:
                problem = f"({self.server.describe()}) could not be reached: {_cause(error)}"
                raise McpServerError(self.name, problem) from None
            log.warning('MCP server "%s" connection failed: %s', self.name, _cause(error))
        finally:
            if self._live is attempt.live:
                self._live = _Down("is restarting")
        if attempt.failed is not None:
            raise attempt.failed
        return attempt.live is not None and attempt.live.answered

    async def _run(self, attempt: _Attempt, on_ready: Callable[[], object]) -> None:
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        async with open_transport(self.server) as (read, write), anyio.create_task_group() as group:
            ended = anyio.Event()
            group.start_soon(_relay, read, send, ended)
            async with ClientSession(receive, write, message_handler=self._on_message) as session:
                attempt.live = _Connection(session=session, ended=ended)
                try:
                    await self._start(attempt.live)
                except McpServerError as error:
                    attempt.failed = error
                else:
                    attempt.started = True
                    on_ready()
                    await ended.wait()
            group.cancel_scope.cancel()

    async def _start(self, live: _Connection) -> None:
        """The handshake and the first listing, within `connect_timeout`."""
        where = self.server.describe()
        with anyio.move_on_after(self.connect_timeout) as waited:
            try:
                await live.session.initialize()
                await self._list(live.session)
            except MCPError as error:
                what = (
                    "closed the connection"
                    if error.code == types.CONNECTION_CLOSED
                    else f"answered {error.error.message!r}"
                )
                raise McpServerError(
                    self.name, f"({where}) {what} during the MCP handshake: is it an MCP server?"
                ) from None
        if waited.cancelled_caught:
            raise McpServerError(
                self.name,
                f"({where}) did not answer the MCP handshake within {self.connect_timeout:g} s",
            )
        self._live = live

    async def _on_message(self, message: IncomingMessage) -> None:
        """Relist on `tools/list_changed`; log what the transport could not read."""
        if isinstance(message, Exception):
            log.warning('MCP server "%s" sent what is not MCP: %s', self.name, message)
        elif isinstance(message, types.ToolListChangedNotification):
            live = self._live
            if isinstance(live, _Connection):
                await self._list(live.session)

    async def _list(self, session: ClientSession) -> None:
        """List every tool (all pages) and make the registry hold exactly the allowed ones."""
        async with self._listing:
            offered: list[types.Tool] = []
            cursor: str | None = None
            for _ in range(MAX_TOOL_PAGES):
                params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
                page = await session.list_tools(params=params)
                offered.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            self._install(offered)

    def _install(self, offered: list[types.Tool]) -> None:
        wanted = {
            self.prefix + tool.name: tool
            for tool in offered
            if self.allowed is None or tool.name in self.allowed
        }
        missing = sorted((self.allowed or set()) - {tool.name for tool in offered})
        if missing:
            log.warning('MCP server "%s" offers no tool named %s', self.name, ", ".join(missing))
        for registered in [name for name in self.refused if name not in wanted]:
            del self.refused[registered]
        for registered, tool in list(self.offered.items()):
            if wanted.get(registered) != tool:
                self.registry.unregister(registered)
                del self.offered[registered]
        for registered, tool in wanted.items():
            if registered not in self.offered:
                self._register(registered, tool)

    def _register(self, registered: str, tool: types.Tool) -> None:
        async def run(args: JsonObject, call: ToolCall) -> ToolResult:
            return await self.call(tool.name, args, call)

        try:
            self.registry.register(
                run,
                name=registered,
                parameters=tool.input_schema,
                description=tool.description or tool.title or "",
                requires_follow_up=self._follow_up,
            )
        except ToolSchemaError as error:
            self.refused[registered] = str(error)
            log.warning('MCP server "%s": tool "%s" left out: %s', self.name, tool.name, error)
            return
        self.refused.pop(registered, None)
        self.offered[registered] = tool


async def _relay(
    read: AsyncIterable[SessionMessage | Exception],
    send: MemoryObjectSendStream[SessionMessage | Exception],
    ended: anyio.Event,
) -> None:
    """Pass the transport's messages to the session; their end (the server died) ends it."""
    try:
        async with send:
            async for message in read:
                await send.send(message)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    finally:
        ended.set()


def _progress_notices(call: ToolCall) -> ProgressFnT:
    """MCP progress of one call as the tool's progress notices."""

    async def notify(progress: float, total: float | None, message: str | None) -> None:
        amount = f"{progress:g}" if total is None else f"{progress:g}/{total:g}"
        await call.notify(
            f"{call.name}: {message} ({amount})" if message else f"{call.name}: {amount}"
        )

    return notify


def _follow_up_for(server: str, rule: bool | FollowUpRule) -> bool | FollowUpRule:
    """The registry's follow-up rule, asked with this server's name."""
    if not callable(rule):
        return rule

    def ask(provider: ProviderDescriptor, _server: str | None) -> bool:
        return rule(provider, server)

    return ask


_PREFIX = re.compile(r"^[A-Za-z0-9_-]*$")


def _check_options(prefix: str, positive: dict[str, float], not_negative: dict[str, float]) -> None:
    """Refuse what would fail on every tool (the prefix) or never end (a negative delay)."""
    if not _PREFIX.match(prefix):
        raise InvalidOption(
            f"McpToolSource: prefix {prefix!r} must be letters, digits, '_' or '-' "
            "(it starts every tool's name); give prefix= to choose one"
        )
    for option, value in positive.items():
        if not value > 0:
            raise InvalidOption(f"McpToolSource: {option} must be more than 0, got {value!r}")
    for option, value in not_negative.items():
        if not value >= 0:
            raise InvalidOption(f"McpToolSource: {option} must be 0 or more, got {value!r}")


def _cause(error: BaseException) -> str:
    """The error inside nested single-error groups, with its type: what a person can act on."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}"


def _failure(error: str) -> ToolResult:
    return ToolResult(success=False, error=error)
