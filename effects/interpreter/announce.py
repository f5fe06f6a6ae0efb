"""The notices of a turn (SPEC 8) and its log lines: sent, logged, never fatal."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from toolloop.effects.interpreter.attempt import Attempt, log
from toolloop.effects.notices import render_notice
from toolloop.effects.observe import NoticeShown
from toolloop.effects.ports import Notice
from toolloop.engine import commands as fx


class Announcer(Attempt):
    """Sends the turn's notices to the channel and its `Log` effects to the logger."""

    __slots__ = ()

    async def _notice(self, effect: fx.SendNotice) -> None:
        notice = render_notice(effect, self.turn, self.catalog, self.registry.redact)
        send = self.channel.send_hidden_notice if effect.hidden else self.channel.send_notice
        await self._send(send, notice)

    async def _send(self, send: Callable[[Notice], Awaitable[None]], notice: Notice) -> None:
        """A notice that fails to send is logged and never ends the turn."""
        try:
            await send(notice)
        except Exception:
            log.exception("could not send the %s notice", notice.key)
        else:
            if self.on_event is not None:
                self.on_event(NoticeShown(attempt=self.attempt, notice=notice))

    def _log(self, effect: fx.Log) -> None:
        level = _LEVELS[effect.level]
        if log.isEnabledFor(level):  # skips building the record's `extra` when off
            log.log(level, effect.message, extra={"fields": effect.fields})


_LEVELS = {
    fx.Level.INFO: logging.INFO,
    fx.Level.WARNING: logging.WARNING,
    fx.Level.ERROR: logging.ERROR,
}
