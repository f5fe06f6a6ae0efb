"""Turns that survive a restart of the bot's process: the embedded SQLite journal.

    from toolloop.durable import Journal, TurnPorts, resume, run_journaled

See docs/durable.md. Nothing here needs a server: SQLite is in the standard library.
"""

from toolloop.effects.durable.journal import (
    HeldMessage,
    Journal,
    JournaledTurn,
    JournalError,
    TurnInProgress,
)
from toolloop.effects.durable.replay import ReplayError
from toolloop.effects.durable.resume import (
    STALE_AFTER_S,
    HeldReport,
    HoldingChannel,
    RecallingChannel,
    TurnPorts,
    resume,
    resume_turn,
    run_journaled,
)

__all__ = [
    "STALE_AFTER_S",
    "HeldMessage",
    "HeldReport",
    "HoldingChannel",
    "Journal",
    "JournalError",
    "JournaledTurn",
    "RecallingChannel",
    "ReplayError",
    "TurnInProgress",
    "TurnPorts",
    "resume",
    "resume_turn",
    "run_journaled",
]
