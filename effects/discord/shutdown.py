"""SIGTERM and SIGINT close the bot as a deploy expects, a second one exits at once.

systemd, Docker and Kubernetes stop a process with SIGTERM and kill it a
grace period later. On the first signal the bot takes no new message and
closes (`ToolloopBot.close`): with a journal, the running turns are suspended
where they stand, and the next start resumes each in the same message;
without one, they end as `/kill` ends them, each reply cut short marked,
within `shutdown_grace_seconds`. Then the client disconnects and
`toolloop discord` exits 0. A second signal, for whoever will not wait, ends
the process at once by that signal (a journaled turn survives that too, as it
survives `kill -9`). Each signal is logged in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Iterator

from toolloop.effects.discord.bot import ToolloopBot

log = logging.getLogger("toolloop.discord")
SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def closing_on_signals(bot: ToolloopBot) -> Iterator[None]:
    """Within the block, SIGTERM or SIGINT closes `bot`, and a second one of them ends the
    process at once; the event loop's handlers are removed after it."""
    loop = asyncio.get_running_loop()
    closing: list[asyncio.Task[None]] = []

    def signalled(number: signal.Signals) -> None:
        if closing:
            log.warning("%s again: exiting at once", number.name)
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)
            return
        running = bot.turns.running()
        turns = f"{running} running turn{'' if running == 1 else 's'}"
        if bot.journal is not None:
            then = f"suspending {turns} to the journal"
        else:
            then = f"stopping {turns} within {bot.settings.shutdown_grace_seconds} s"
        log.info("%s: taking no new messages, %s, then closing", number.name, then)
        closing.append(loop.create_task(bot.close()))

    for number in SIGNALS:
        loop.add_signal_handler(number, signalled, number)
    try:
        yield
    finally:
        for number in SIGNALS:
            loop.remove_signal_handler(number)
