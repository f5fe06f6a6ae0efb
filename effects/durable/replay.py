"""Where a journaled turn stands: its events replayed through `step`, purely.

The journal stores events only; this module rebuilds the state from them and
reads off what the process was doing when it died: the awaited effect of the
last step (a stream, a tool, the calls of a batch, the calls waiting for a
person's approval), which the resumed attempt carries out again
(`toolloop.effects.durable.resume`).
"""

from __future__ import annotations

import attrs

from toolloop.effects.interpreter import StartFrom
from toolloop.engine import commands as fx
from toolloop.engine.events import ApprovalDecided, Event, StreamEnded, ToolSettled
from toolloop.engine.step import InvalidEvent, initial_state, step
from toolloop.states import FunctionCall, LoopConfig, TurnSettings
from toolloop.states.errors import ToolloopError


class ReplayError(ToolloopError, ValueError):
    """A journaled turn whose events do not replay (written by another engine version)."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"turn {key!r} of the journal does not replay: {problem}")
        self.key = key
        self.problem = problem


@attrs.frozen(kw_only=True)
class Standing:
    """A turn rebuilt from its events: where its attempt resumes and what was in flight."""

    start_from: StartFrom | None
    """None when no event was journaled yet: the attempt starts afresh."""
    in_flight: tuple[FunctionCall, ...]
    """The tool calls that may have been running when the process died."""
    streaming: bool
    """A provider call was in flight: it is made again, after the text already delivered."""


def standing(
    key: str, config: LoopConfig, turn: TurnSettings, events: tuple[Event, ...]
) -> Standing:
    """Replay `events` and say where the turn resumes (`ReplayError` if they do not replay).

    The last event is not consumed: the resumed attempt steps it again, so the
    effects of that last step (its notices, its awaited effect) are carried out
    again: at least once for a crash in the middle of them. The calls of a batch
    started by earlier steps and not settled are started again first, and the
    calls still waiting for approval are asked about again (each under a fresh
    `TOOL_APPROVAL_TIMEOUT_MS`: the old process's timer died with it).
    """
    if not events:
        return Standing(start_from=None, in_flight=(), streaming=False)
    state = initial_state(config, turn)
    started: dict[int, fx.StartTool | fx.AskApproval] = {}
    """The calls of the batch running or waiting for approval, by their position in it."""
    chain = False
    try:
        for event in events[:-1]:
            out = step(state, event)
            state = out.state
            _settle(started, event)
            started.update((e.index, e) for e in out.effects if isinstance(e, _OPEN))
            chain = chain or any(isinstance(e, fx.MarkToolChainActive) for e in out.effects)
        last = step(state, events[-1]).effects
    except InvalidEvent as error:
        raise ReplayError(key, str(error)) from None
    _settle(started, events[-1])
    prelude = ((fx.MarkToolChainActive(),) if chain else ()) + tuple(
        started[index] for index in sorted(started)
    )
    calls = [effect.call for effect in prelude if isinstance(effect, fx.StartTool)]
    calls += [e.call for e in last if isinstance(e, (fx.StartTool, fx.DispatchTool))]
    return Standing(
        start_from=StartFrom(state=state, event=events[-1], prelude=prelude),
        in_flight=tuple(calls),
        streaming=isinstance(last[-1], fx.StreamOnce),
    )


_OPEN = (fx.StartTool, fx.AskApproval)
"""The effects that leave a call of the batch open until an event answers it."""


def _settle(started: dict[int, fx.StartTool | fx.AskApproval], event: Event) -> None:
    """A new stream's batch starts afresh; a settled call runs no more, a decided one waits
    no more (a decision that is refused is asked again by the step it answers)."""
    if isinstance(event, StreamEnded):
        started.clear()
    elif isinstance(event, (ToolSettled, ApprovalDecided)):
        started.pop(event.index, None)
