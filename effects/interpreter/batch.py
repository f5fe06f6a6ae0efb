"""Stage 02 for a batch: its calls side by side (SPEC 6b) and its waits for approval (SPEC 6c)."""

from __future__ import annotations

import anyio
import attrs
from anyio.abc import TaskStatus

from toolloop.effects.interpreter.attempt import log
from toolloop.effects.interpreter.calls import Asked, Started
from toolloop.effects.interpreter.errors import NoApprovalsPort
from toolloop.effects.interpreter.tools import ToolStage, failure, new_tool_invocation, timed_out
from toolloop.effects.ports import ApprovalPort
from toolloop.engine import commands as fx
from toolloop.engine.events import ApprovalDecided, ToolSettled
from toolloop.states import ApprovalDecision, ToolResult


class BatchStage(ToolStage):
    """Starts, waits for and ends the calls of a batch and its approval requests."""

    __slots__ = ()

    async def _start_tool(self, effect: fx.StartTool) -> None:
        """Start a call of the batch in its own task, under its own timer, and go on.

        Started with `TaskGroup.start`: the task reports itself started right before
        it enters the registry, and runs on without a checkpoint, so the calls of a
        batch enter their tools in the model's order on every backend.
        """
        run = Started(effect, self._alarm.now(), self._timeout_ms(effect.call.name))
        self._register_batch_kill()
        self._started[effect.index] = run
        await self.runners.start(self._run_started, run)
        if self._killed.is_set():  # killed between calls: this one ends at once too
            self._kill_batch()

    def _register_batch_kill(self) -> None:
        if self._batch_kill is None:
            self._batch_kill = self._kill_batch
            self.control.register_kill(self._batch_kill)

    async def _run_started(
        self, run: Started, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        effect = run.effect
        invocation = new_tool_invocation(
            killed=self._killed,
            notify=self._progress_notice(effect.context, run),
            streaming=self._streaming_context(),
        )
        with run.scope:
            try:
                work = self.registry.execute(effect.call, effect.context, invocation)
                task_status.started()
                result = await work
            except Exception as error:  # not a tool's failure (those are results): the attempt's
                self._batch_error = error
                result = failure(f"{type(error).__name__}: {error}")
            self._decide(run, result)

    def _decide(self, run: Started, result: ToolResult) -> None:
        """A started call's outcome: reported to the runner in the order outcomes came."""
        if not run.open:
            return
        run.end()
        del self._started[run.effect.index]
        self._settled.append((run, result))
        if self._batch_woken is not None:
            self._batch_woken.set()

    def _kill_batch(self) -> None:
        """The kill ends every wait for approval and every started call at once (6b.4, 6c)."""
        for asked in list(self._asked.values()):
            self._decided(asked, None)
        for run in list(self._started.values()):
            self._decide(run, failure(f"Tool {run.effect.call.name} was killed"))

    # -- stage 02, approval (SPEC 6c) ------------------------------------------------------

    async def _ask_approval(self, effect: fx.AskApproval) -> None:
        """Ask the host in a task of its own and go on; the wait keeps its first deadline."""
        if self.approvals is None:
            raise NoApprovalsPort(
                f"tool {effect.request.tool} needs approval (SPEC 6c), but run_tool_loop was "
                "given no approvals port: pass approvals= (for example MemoryApprovals)"
            )
        index = effect.index
        deadline = self._approval_deadlines.setdefault(
            index, self._alarm.now() + effect.timeout_ms / 1000
        )
        asked = Asked(effect, deadline)
        self._register_batch_kill()
        self._asked[index] = asked
        await self.runners.start(self._run_asked, self.approvals, asked)
        if self._killed.is_set():
            self._kill_batch()

    async def _run_asked(
        self,
        approvals: ApprovalPort,
        asked: Asked,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """The host's `ask`, entered without a checkpoint after `started` (as a started
        call's tool is), so the requests of a batch reach the host in the model's order."""
        request = asked.effect.request
        shown = attrs.evolve(request, args=self.registry.redact(request.tool, request.args))
        with asked.scope:
            try:
                asking = approvals.ask(shown)
                task_status.started()
                decision = await asking
            except Exception as error:  # the host's prompt failed: the attempt's failure
                self._batch_error = error
                decision = None
            self._decided(asked, decision)

    def _decided(self, asked: Asked, decision: ApprovalDecision | None) -> None:
        """A wait's outcome: reported to the runner in the order outcomes came."""
        if not asked.open:
            return
        asked.end()
        del self._asked[asked.effect.index]
        self._settled.append((asked, decision))
        if self._batch_woken is not None:
            self._batch_woken.set()

    async def _withdraw(self, effect: fx.WithdrawApproval) -> None:
        """Tell the host the request is moot; a host that fails to hear it is only logged."""
        if self.approvals is None:
            return
        request = effect.request
        shown = attrs.evolve(request, args=self.registry.redact(request.tool, request.args))
        try:
            await self.approvals.withdraw(shown)
        except Exception:
            log.exception("withdrawing the approval request of %s failed", request.tool)

    async def _await_tools(self, effect: fx.AwaitTools) -> ToolSettled | ApprovalDecided:
        """The next outcome: a started call settled, a wait for approval ended, or a timer
        (a call's own, or a wait's `TOOL_APPROVAL_TIMEOUT_MS`) ran out first."""
        while not self._settled:
            if self._batch_error is not None:
                raise self._batch_error
            assert self._started or self._asked, "AwaitTools with nothing running or waiting"
            waits: list[Started | Asked] = [*self._started.values(), *self._asked.values()]
            self._batch_woken = anyio.Event()
            with anyio.move_on_at(min(wait.deadline for wait in waits)):
                await self._batch_woken.wait()
            now = self._alarm.now()
            for wait in sorted(waits, key=lambda wait: wait.deadline):
                if wait.deadline > now:
                    continue
                if isinstance(wait, Asked):
                    self._decided(wait, None)
                else:
                    self._decide(wait, timed_out(wait.effect.call.name, wait.timeout_ms))
        if self._batch_error is not None:
            raise self._batch_error
        run, outcome = self._settled.popleft()
        if not self._started and not self._asked and not self._settled:
            self._end_batch()
        if isinstance(outcome, ToolResult):
            assert isinstance(run, Started)
            return self._settled_event(run.effect.call.name, run.effect.index, run.started, outcome)
        assert isinstance(run, Asked)
        index = run.effect.index
        if outcome is None or outcome.digest == run.effect.request.digest:
            self._approval_deadlines.pop(index, None)  # a refused decision keeps the deadline
        stop = self.control.pending_request()
        return ApprovalDecided(index=index, decision=outcome, stop=stop)

    def _end_batch(self) -> None:
        """The attempt is over: no started call runs on, its kill handle is gone."""
        if self._batch_kill is not None:
            self.control.deregister_kill(self._batch_kill)
            self._batch_kill = None
        ending: list[Started | Asked] = [*self._started.values(), *self._asked.values()]
        for run in ending:
            run.end()
        self._started.clear()
        self._asked.clear()
        self._settled.clear()
