"""Stage 02 for a batch: its calls side by side (SPEC 6b) and its waits for approval (SPEC 6c)."""

from __future__ import annotations

import anyio
from anyio.abc import TaskStatus

from toolloop.effects.interpreter.batch_calls import Asked, Batch, Started
from toolloop.effects.interpreter.calls import failure
from toolloop.effects.interpreter.errors import NoApprovalsPort
from toolloop.effects.interpreter.tools import ToolStage, timed_out
from toolloop.effects.ports import ApprovalPort, shown_request, withdraw
from toolloop.engine import commands as fx
from toolloop.engine.events import ApprovalDecided, ToolSettled
from toolloop.states import ToolResult


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
        batch = self._open_batch()
        batch.started[effect.index] = run
        await self.runners.start(self._run_started, batch, run)
        if self._killed.is_set():  # killed between calls: this one ends at once too
            batch()

    def _open_batch(self) -> Batch:
        """The batch, made at its first call, with its kill handle registered."""
        batch = self._batch
        if batch is None:
            batch = self._batch = Batch()
        if not batch.registered:
            batch.registered = True
            self.control.register_kill(batch)
        return batch

    async def _run_started(
        self,
        batch: Batch,
        run: Started,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        effect = run.effect
        invocation = self._invocation(effect, run)
        with run.scope:
            try:
                work = self.registry.execute(effect.call, effect.context, invocation)
                task_status.started()
                result = await work
            except Exception as error:  # not a tool's failure (those are results): the attempt's
                batch.error = error
                result = failure(f"{type(error).__name__}: {error}")
            batch.decide(run, result)

    # -- stage 02, approval (SPEC 6c) ------------------------------------------------------

    async def _ask_approval(self, effect: fx.AskApproval) -> None:
        """Ask the host in a task of its own and go on; the wait keeps its first deadline."""
        if self.approvals is None:
            raise NoApprovalsPort(
                f"tool {effect.request.tool} needs approval (SPEC 6c), but run_tool_loop was "
                "given no approvals port: pass approvals= (for example MemoryApprovals)"
            )
        index = effect.index
        batch = self._open_batch()
        deadline = batch.deadlines.setdefault(index, self._alarm.now() + effect.timeout_ms / 1000)
        asked = Asked(effect, deadline)
        batch.asked[index] = asked
        await self.runners.start(self._run_asked, self.approvals, batch, asked)
        if self._killed.is_set():
            batch()

    async def _run_asked(
        self,
        approvals: ApprovalPort,
        batch: Batch,
        asked: Asked,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """The host's `ask`, entered without a checkpoint after `started` (as a started
        call's tool is), so the requests of a batch reach the host in the model's order."""
        request = asked.effect.request
        shown = shown_request(self.registry, request)
        with asked.scope:
            try:
                asking = approvals.ask(shown)
                task_status.started()
                decision = await asking
            except Exception as error:  # the host's prompt failed: the attempt's failure
                batch.error = error
                decision = None
            batch.decided(asked, decision)

    async def _withdraw(self, effect: fx.WithdrawApproval) -> None:
        await withdraw(self.approvals, self.registry, effect.request)

    async def _await_tools(self, effect: fx.AwaitTools) -> ToolSettled | ApprovalDecided:
        """The next outcome: a started call settled, a wait for approval ended, or a timer
        (a call's own, or a wait's `TOOL_APPROVAL_TIMEOUT_MS`) ran out first."""
        batch = self._batch
        assert batch is not None, "AwaitTools with no batch"
        while not batch.settled:
            if batch.error is not None:
                raise batch.error
            waits = batch.waits()
            assert waits, "AwaitTools with nothing running or waiting"
            batch.woken = anyio.Event()
            with anyio.move_on_at(min(wait.deadline for wait in waits)):
                await batch.woken.wait()
            now = self._alarm.now()
            for wait in sorted(waits, key=lambda wait: wait.deadline):
                if wait.deadline > now:
                    continue
                if isinstance(wait, Asked):
                    batch.decided(wait, None)
                else:
                    batch.decide(wait, timed_out(wait.effect.call.name, wait.timeout_ms))
        if batch.error is not None:
            raise batch.error
        run, outcome = batch.settled.popleft()
        event: ToolSettled | ApprovalDecided
        if isinstance(outcome, ToolResult):
            assert isinstance(run, Started)
            event = self._tool_settled(run, outcome)
        else:
            assert isinstance(run, Asked)
            index = run.effect.index
            if outcome is None or outcome.digest == run.effect.request.digest:
                batch.deadlines.pop(index, None)  # a refused decision keeps the deadline
            stop = self.control.pending_request()
            event = ApprovalDecided(index=index, decision=outcome, stop=stop)
        if not batch.started and not batch.asked and not batch.settled:
            self._end_batch()
        return event

    def _end_batch(self) -> None:
        """Nothing of the batch runs on (every outcome reported, or the attempt is over);
        its kill handle is gone. A call to be asked again keeps the batch for its deadline."""
        batch = self._batch
        if batch is None:
            return
        if batch.registered:
            batch.registered = False
            self.control.deregister_kill(batch)
        batch.end()
        if not batch.deadlines:
            self._batch = None
