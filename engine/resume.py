"""Resuming a turn persisted while it waited for approval (SPEC 6c).

The wait is a phase of the machine, so the state it waits in is all a restarted
process needs: `resume` gives the step that re-enters it, asking the host again
about every call still waiting (each under a fresh `TOOL_APPROVAL_TIMEOUT_MS`:
the old process's timer died with it) and waiting for the first answer. The
interpreter runs it in place of `step` (`run_tool_loop(resume=...)`).
"""

from toolloop.engine.commands import AskApproval, AwaitTools, Effect
from toolloop.engine.step import Step
from toolloop.engine.table import Move
from toolloop.engine.tool_call import approval_request
from toolloop.states import IterationState, Phase
from toolloop.states.errors import ToolloopError


class NotResumable(ToolloopError, ValueError):
    """The state is not one a turn can be resumed from; the message says why."""


def resume(state: IterationState) -> Step:
    """The step that puts `state` back to waiting: every waiting call asked again."""
    pending = state.pending
    if state.phase is not Phase.DISPATCHING or pending is None or not pending.batch:
        raise NotResumable(
            f"only a turn waiting for approval can be resumed; this one is {state.phase.value}"
        )
    if any(call.running for call in pending.batch):
        raise NotResumable(
            "a tool call of this turn was running when it was persisted: its outcome is lost, "
            "so the turn cannot be resumed (persist a turn while it only waits for approval)"
        )
    effects: list[Effect] = [
        AskApproval(
            request=approval_request(state.turn, call.call),
            index=index,
            timeout_ms=state.config.tool_approval_timeout_ms,
        )
        for index, call in enumerate(pending.batch)
        if call.waiting
    ]
    if not effects:
        raise NotResumable("no call of this turn waits for approval")
    return Step(state=state, effects=(*effects, AwaitTools()), move=Move.RESUMED)
