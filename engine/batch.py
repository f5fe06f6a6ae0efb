"""Several calls from one stream (SPEC 6b): which calls of a batch start, and when.

Pure functions of the batch as `PendingCall.batch` holds it; the rows of
`toolloop.engine.table` decide when they apply, and the actions of
`toolloop.engine.actions` build the effects (`DispatchTool` for a call that runs
alone, `StartTool` and `AwaitTools` for calls that run beside each other).
"""

from collections.abc import Sequence

import attrs

from toolloop.engine.policy import SHORT_TERM_MEMORY_TOOL
from toolloop.states import ApprovalStatus, BatchCall, FunctionCall, ToolResult


def call_name(call: FunctionCall) -> str | None:
    """The trimmed name of a well-formed call of a batch, or None for a blank one (6b.1)."""
    return call.name.strip() or None


def is_exclusive(name: str, registry_says: bool) -> bool:
    """The call runs alone: the registry says so, or it is the short-term memory tool (6b.3)."""
    return registry_says or name == SHORT_TERM_MEMORY_TOOL


def ready(batch: Sequence[BatchCall], started: int, limit: int) -> tuple[list[int], int]:
    """The positions of the calls to start now, in the model's order, and the new frontier.

    Calls start in the model's order (a refused call is passed over): each while
    fewer than `limit` run, none beside an exclusive one, an exclusive one only
    when nothing runs (SPEC 6b item 3). The first call that cannot start holds
    back every later one. A call waiting for approval is passed over too, and
    once approved starts before the frontier's calls, as its decision arrives
    (SPEC 6c).
    """
    running = [call for call in batch if call.running]
    alone = any(call.exclusive for call in running)
    busy = len(running)
    starting: list[int] = []
    approved = [at for at in range(started) if _approved_unstarted(batch[at])]
    for at in (*approved, *range(started, len(batch))):
        call = batch[at]
        if call.refusal is None and not call.waiting:
            if alone or busy >= limit or (busy and call.exclusive):
                break
            starting.append(at)
            busy += 1
            alone = call.exclusive
        started = max(started, at + 1)
    return starting, started


def _approved_unstarted(call: BatchCall) -> bool:
    """Approved after the frontier passed it while it waited, and not yet started."""
    return call.approval is ApprovalStatus.APPROVED and not call.running and call.result is None


def settled(
    batch: tuple[BatchCall, ...], index: int, result: ToolResult, requires_follow_up: bool
) -> tuple[BatchCall, ...]:
    """The batch with the call at `index` settled with `result`."""
    call = attrs.evolve(
        batch[index], running=False, result=result, requires_follow_up=requires_follow_up
    )
    return (*batch[:index], call, *batch[index + 1 :])


def started_calls(batch: tuple[BatchCall, ...], positions: Sequence[int]) -> tuple[BatchCall, ...]:
    """The batch with the calls at `positions` running."""
    chosen = set(positions)
    return tuple(
        attrs.evolve(call, running=True) if at in chosen else call for at, call in enumerate(batch)
    )


def succeeded(call: BatchCall) -> bool:
    """A settled call whose tool succeeded (a refused call failed)."""
    return call.result is not None and call.result.success
