"""The fire-and-forget effects on the turn control, and the stash's take."""

from __future__ import annotations

from toolloop.effects.interpreter.attempt import Attempt
from toolloop.engine import commands as fx
from toolloop.engine.events import StashTaken


class ControlEffects(Attempt):
    """Tells the turn control what the core decided; takes a stashed item."""

    __slots__ = ()

    async def _take_stash(self, effect: fx.TakeStashedContext) -> StashTaken:
        return StashTaken(item=None if self.stash is None else self.stash.take(effect.key))

    def _reset_follow_up(self, effect: fx.ResetFollowUpCount) -> None:
        self.control.reset_follow_up_count()

    def _increment_follow_up(self, effect: fx.IncrementFollowUpCount) -> None:
        self.control.increment_follow_up_count()

    def _queue_stop_response(self, effect: fx.QueueStopResponse) -> None:
        self.control.queue_stop_response()

    def _clear_stop(self, effect: fx.ClearStopRequest) -> None:
        self.control.clear_stop_request()

    def _mark_chain(self, effect: fx.MarkToolChainActive) -> None:
        """From now on a follow-up never interrupts a stream: it waits for the turn."""
        self._chain_active = True
        self.control.set_tool_chain_active()

    def _count_usage(self, effect: fx.CountToolUsage) -> None:
        self.control.count_tool_usage(effect.name)

    def _retain(self, effect: fx.RetainAffordance) -> None:
        self.control.retain_affordance(effect.name)

    def _suppress_text(self, effect: fx.SetTextSuppression) -> None:
        """Nothing to do: the next StreamOnce carries the flag and its sink obeys it."""
