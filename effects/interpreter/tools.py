"""Stage 02 for one call: a tool dispatched inline under its fresh timeout (SPEC 6)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from toolloop.effects import port_values
from toolloop.effects.interpreter.announce import Announcer
from toolloop.effects.interpreter.batch_calls import Started
from toolloop.effects.interpreter.calls import ToolRun, failure
from toolloop.effects.notices import identity, progress_notice
from toolloop.effects.ports import StreamingContext, ToolInvocation
from toolloop.engine import build
from toolloop.engine import commands as fx
from toolloop.engine.events import ToolSettled
from toolloop.states import ToolContext, ToolResult
from toolloop.states.loop_config import in_seconds


class ToolStage(Announcer):
    """Dispatches one tool call and settles it into the next event."""

    __slots__ = ()

    def _dispatch(self, effect: fx.DispatchTool) -> Awaitable[ToolSettled]:
        context = effect.context
        timeout_ms = self._timeout_ms(effect.call.name)
        call = ToolRun(effect, self._runner, self._alarm, timeout_ms)
        work = self.registry.execute(effect.call, context, self._invocation(effect, call))
        return self._call(call, work, self._tool_settled)

    def _invocation(
        self, effect: fx.DispatchTool | fx.StartTool, run: ToolRun | Started
    ) -> ToolInvocation:
        """What the running call gets: the turn's kill signal, its notices, its stream."""
        return port_values.tool_invocation(
            killed=self._killed,
            notify=self._progress_notice(effect.context, run),
            streaming=self._streaming_context(effect),
        )

    def _timeout_ms(self, tool: str) -> int:
        """The tool's own timeout (`timeout=` at registration), else the configured one."""
        own = self.registry.timeout_ms(tool)
        return self.config.tool_execution_timeout_ms if own is None else own

    def _overdue_tool(self, call: ToolRun) -> ToolResult:
        """The failure of the kill or the timeout that ended a tool."""
        name = call.effect.call.name
        if call.killed:
            return failure(f"Tool {name} was killed")
        return timed_out(name, call.timeout_ms)

    def _streaming_context(self, effect: fx.DispatchTool | fx.StartTool) -> StreamingContext:
        """The live stream the call came from (SPEC 6 step 3), as its effect carries it.

        The last one is reused while the effects carry the same text and suppression
        (a chain's calls mostly do): it is frozen, and building one costs as much as
        a tool's whole dispatch saves elsewhere.
        """
        last = self._streaming
        text, suppressed = effect.pre_tool_text, effect.text_suppressed
        if last is None or last.pre_tool_text != text or last.text_suppressed != suppressed:
            last = self._streaming = StreamingContext(
                reply_to=self.reply_to,
                identity=identity(self.turn),
                pre_tool_text=text,
                text_suppressed=suppressed,
            )
        return last

    def _tool_settled(self, run: ToolRun | Started, result: ToolResult) -> ToolSettled:
        """The event of a call's outcome, inline (`ToolRun`) or of a batch (`Started`)."""
        effect, descriptor = run.effect, self.provider.descriptor
        return build.tool_settled(
            result=result,
            requires_follow_up=self.registry.requires_follow_up(
                effect.call.name, descriptor, descriptor.server
            ),
            duration_ms=round((self._alarm.now() - run.started) * 1000),
            stop=self.control.pending_request(),
            index=effect.index,
        )

    def _progress_notice(
        self, context: ToolContext, call: ToolRun | Started
    ) -> Callable[[str], Awaitable[None]]:
        """A tool's progress notices, dropped once its call is over (killed, overdue)."""

        async def notify(text: str) -> None:
            if context.suppress_progress_notices or not call.open:
                return
            notice = progress_notice(text, context.iteration, self.turn)
            await self._send(self.channel.send_notice, notice)

        return notify


def timed_out(name: str, timeout_ms: int) -> ToolResult:
    return failure(f"Tool {name} timed out after {in_seconds(timeout_ms)} s")
